"""llama.cpp as a runtime (llama_cpp_runtime.py declares it): a GGUF file loaded by llama.cpp answers the engine's
model interface (one row's cache and a batch's), so the decode loop, the acceptance rule, the drafters and the screens
run on it unchanged. binding.py reaches llama.cpp; gguf_model.py finds a file and opens contexts on it; llama_lm.py
(one row) and llama_rows.py (many) are its caches; forward_costs.py measures its forward on this CPU."""

from .llama_cpp_runtime import RUNTIME

__all__ = ["RUNTIME"]
