"""A tiny transformers Llama written out as a GGUF file llama.cpp loads: what the llama.cpp runtime's tests run on
without a real model (float32 weights, or Q8_0 for quantised kernels; no vocabulary of its own, so its ids are the
word tokenizer's of tests/tiny.py)."""

from pathlib import Path

import gguf
import numpy as np

from specviz.runtimes.llama_cpp.forward_costs import measure
from specviz.runtimes.llama_cpp.gguf_model import GgufModel
from specviz.runtimes.llama_cpp.llama_cpp_runtime import GgufLoaded


def _rope_rows(weight: np.ndarray, heads: int) -> np.ndarray:
    """q or k as llama.cpp applies rotary embeddings to it: transformers pairs each head's dimension i with i + d/2,
    llama.cpp pairs 2i with 2i + 1, so each head's rows are interleaved from its two halves."""
    rows, columns = weight.shape
    half = rows // heads // 2
    return weight.reshape(heads, 2, half, columns).swapaxes(1, 2).reshape(rows, columns)


def save_gguf(model, path: Path, quantised: bool = False) -> Path:
    """`model` (a transformers LlamaForCausalLM) as a GGUF of the llama architecture at `path`."""
    config = model.config
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(float(getattr(config, "rope_theta", None) or 10000.0))
    writer.add_rope_dimension_count(config.hidden_size // heads)
    writer.add_layer_norm_rms_eps(float(config.rms_norm_eps))
    writer.add_vocab_size(config.vocab_size)
    writer.add_tokenizer_model("none")  # ids only: the tests' word tokenizer spells them
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantised else gguf.LlamaFileType.ALL_F32)

    def put(name: str, tensor, matrix: bool = True) -> None:
        values = tensor.detach().float().numpy().astype(np.float32)
        if quantised and matrix and values.ndim == 2:
            packed = gguf.quants.quantize(values, gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(name, packed, raw_shape=packed.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(name, values)

    state = model.state_dict()
    put("token_embd.weight", state["model.embed_tokens.weight"], matrix=False)
    for i in range(config.num_hidden_layers):
        layer = f"model.layers.{i}."
        put(f"blk.{i}.attn_norm.weight", state[layer + "input_layernorm.weight"])
        q = _rope_rows(state[layer + "self_attn.q_proj.weight"].numpy(), heads)
        k = _rope_rows(state[layer + "self_attn.k_proj.weight"].numpy(), kv_heads)
        put(f"blk.{i}.attn_q.weight", _tensor(q))
        put(f"blk.{i}.attn_k.weight", _tensor(k))
        put(f"blk.{i}.attn_v.weight", state[layer + "self_attn.v_proj.weight"])
        put(f"blk.{i}.attn_output.weight", state[layer + "self_attn.o_proj.weight"])
        put(f"blk.{i}.ffn_norm.weight", state[layer + "post_attention_layernorm.weight"])
        put(f"blk.{i}.ffn_gate.weight", state[layer + "mlp.gate_proj.weight"])
        put(f"blk.{i}.ffn_up.weight", state[layer + "mlp.up_proj.weight"])
        put(f"blk.{i}.ffn_down.weight", state[layer + "mlp.down_proj.weight"])
    put("output_norm.weight", state["model.norm.weight"])
    put("output.weight", state["lm_head.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _tensor(values: np.ndarray):
    import torch

    return torch.from_numpy(np.ascontiguousarray(values))


def load_tiny(path: Path, tokenizer, name: str = "tiny-gguf") -> GgufLoaded:
    """The GGUF at `path` as the llama.cpp runtime loads a model, with the word tokenizer its ids belong to."""
    import torch

    model = GgufModel(path)
    model.forward_curve = measure(model, widths=(1, 2, 4, 8), repeats=1)
    return GgufLoaded(name=name, model=model, tokenizer=tokenizer, device=torch.device("cpu"))
