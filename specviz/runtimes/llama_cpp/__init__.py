"""llama.cpp as specviz's CPU runtime: a GGUF file loaded by llama.cpp answers the engine's model interface (the
caches of engine/cached_lm.py and engine/batched_lm.py), so the decode loop, the acceptance rule, the drafters and
the screens run on it unchanged. binding.py reaches llama.cpp; gguf_model.py finds and loads a file; llama_lm.py
(one row) and llama_rows.py (many) are its caches; forward_costs.py measures its forward on this CPU."""
