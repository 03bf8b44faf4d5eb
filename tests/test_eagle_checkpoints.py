"""EAGLE checkpoints: synthetic ones written in the published layouts (names and shapes spelled out here, not taken
from specviz's module) load and draft; damaged or mismatched ones are refused in one line; specviz's own round-trip."""

import json
import time

import pytest
import torch
from safetensors.torch import save_file
from test_eagle import random_head
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from specviz.drafters.eagle.eagle_checkpoint import EagleCheckpointError, load_eagle, save_eagle
from specviz.drafters.eagle.eagle_drafter import EagleDrafter
from specviz.engine import generate
from specviz.events import generated_ids
from specviz.runs import generate_named
from specviz.settings import Settings

H, INTER, HEADS, KV = 64, 128, 4, 2  # the tiny target's sizes (tests/tiny.py)
HEAD_DIM = H // HEADS


def layer_weights(prefix: str, attention_in: int) -> dict:
    return {
        f"{prefix}.self_attn.q_proj.weight": (HEADS * HEAD_DIM, attention_in),
        f"{prefix}.self_attn.k_proj.weight": (KV * HEAD_DIM, attention_in),
        f"{prefix}.self_attn.v_proj.weight": (KV * HEAD_DIM, attention_in),
        f"{prefix}.self_attn.o_proj.weight": (H, HEADS * HEAD_DIM),
        f"{prefix}.mlp.gate_proj.weight": (INTER, H),
        f"{prefix}.mlp.up_proj.weight": (INTER, H),
        f"{prefix}.mlp.down_proj.weight": (H, INTER),
        f"{prefix}.post_attention_layernorm.weight": (H,),
    }


def eagle1_shapes(vocab: int) -> dict:
    """EAGLE-1/2 (e.g. yuhuili/EAGLE-Vicuna-7B-v1.3): fc over [embedding, feature] with a bias, one layer without
    an input norm, and the embedding copied in."""
    return {"fc.weight": (H, 2 * H), "fc.bias": (H,), "embed_tokens.weight": (vocab, H), **layer_weights("layers.0", H)}


def eagle3_shapes(vocab: int, draft_vocab: int) -> dict:
    return {
        "fc.weight": (H, 3 * H),
        **layer_weights("midlayer", 2 * H),
        "midlayer.input_layernorm.weight": (H,),
        "midlayer.hidden_norm.weight": (H,),
        "norm.weight": (H,),
        "lm_head.weight": (draft_vocab, H),
    }


def config(vocab: int, **extra) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": H,
        "intermediate_size": INTER,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV,
        "num_hidden_layers": 1,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab,
        "hidden_act": "silu",
        "torch_dtype": "float16",
        **extra,
    }


def write(folder, shapes: dict, cfg: dict, fmt: str = "bin", extra_tensors: dict | None = None):
    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    state = {
        k: (torch.ones(s) if k.endswith("norm.weight") else torch.randn(s, generator=g) * 0.05).half()
        for k, s in shapes.items()
    }
    state.update(extra_tensors or {})
    (folder / "config.json").write_text(json.dumps(cfg))
    if fmt == "bin":
        torch.save(state, folder / "pytorch_model.bin")
    else:
        save_file(state, str(folder / "model.safetensors"))
    return folder


def eagle3_maps(vocab: int, draft_vocab: int) -> dict:
    chosen = torch.arange(0, vocab, 3)[:draft_vocab]  # the draft vocabulary: every third target id
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[chosen] = True
    return {"d2t": chosen - torch.arange(draft_vocab), "t2d": t2d}


def eagle3_folder(folder, vocab: int, draft_vocab: int):
    """An EAGLE-3 head of Llama layers in the published layout, over a draft vocabulary of every third target id."""
    cfg = config(vocab, draft_vocab_size=draft_vocab)
    return write(folder, eagle3_shapes(vocab, draft_vocab), cfg, "safetensors", eagle3_maps(vocab, draft_vocab))


@pytest.mark.parametrize("fmt", ["bin", "safetensors"])
def test_an_eagle1_checkpoint_in_the_published_layout_loads_and_keeps_greedy_output(target, tokenizer, tmp_path, fmt):
    folder = write(tmp_path / "e1", eagle1_shapes(target.vocab_size), config(target.vocab_size), fmt)
    head, layers = load_eagle(folder, target)
    assert head.layout == "eagle1" and layers == (-1,) and head.fc.bias is not None
    ids = tokenizer.encode("w1 w2 w3 w4")
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=30)))
    events = generate_named(target, ids, Settings(max_new_tokens=30, gamma=4), "eagle", options={"eagle": str(folder)})
    assert generated_ids(events) == plain


def test_an_eagle3_checkpoint_loads_reads_three_layers_and_drafts_its_vocabulary(target, tokenizer, tmp_path):
    vocab = target.vocab_size
    head, layers = load_eagle(eagle3_folder(tmp_path / "e3", vocab, 20), target)
    assert head.layout == "eagle3" and len(layers) == 3
    ids = tokenizer.encode("w1 w2 w3 w4")
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=30)))
    events = list(generate(target, ids, Settings(max_new_tokens=30, gamma=3), EagleDrafter(head, layers)))
    assert generated_ids(events) == plain
    drafted = {t for e in events for c in (e.candidates or [e.proposed]) for t in c}
    assert drafted and all(t % 3 == 0 for t in drafted)


def _damage(name, target, tmp_path):
    vocab = target.vocab_size
    shapes, cfg, extra = eagle1_shapes(vocab), config(vocab), None
    if name == "missing key":
        del shapes["layers.0.mlp.up_proj.weight"]
    elif name == "extra key":
        shapes["layers.0.input_layernorm.weight"] = (H,)
    elif name == "wrong shape":
        shapes["layers.0.mlp.up_proj.weight"] = (INTER + 1, H)
    elif name == "wrong width":
        cfg["hidden_size"] = 2 * H
    elif name == "another architecture":
        cfg["model_type"] = "qwen2"
    elif name == "another vocabulary":
        cfg["vocab_size"] = vocab + 5
    elif name == "another base":
        cfg["base_model_name_or_path"] = "someone/other-model"
    elif name == "unknown names":
        shapes = {"head.0.weight": (H, H)}
    elif name == "embedding of another size":
        shapes["embed_tokens.weight"] = (vocab + 1, H)
    elif name == "d2t out of range":
        shapes, cfg = eagle3_shapes(vocab, 20), config(vocab, draft_vocab_size=20)
        extra = eagle3_maps(vocab, 20)
        extra["d2t"][-1] = vocab
    folder = write(tmp_path / "bad", shapes, cfg, "safetensors", extra)
    if name == "truncated file":
        data = (folder / "model.safetensors").read_bytes()
        (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    elif name == "no weights":
        (folder / "model.safetensors").unlink()
    elif name == "bad shortlist":
        (folder / "head_vocab.json").write_text("[1, 2, -3]")
    elif name == "config not an object":
        (folder / "config.json").write_text("[1]")
    return folder


DAMAGES = {
    "missing key": "missing",
    "extra key": "unexpected",
    "wrong shape": "has shape",
    "wrong width": "width",
    "another architecture": "qwen2 target",
    "another vocabulary": "vocabulary",
    "another base": "trained for",
    "unknown names": "unexpected names",
    "embedding of another size": "embed_tokens",
    "d2t out of range": "d2t",
    "truncated file": "cannot read",
    "no weights": "no EAGLE weights",
    "bad shortlist": "head_vocab.json",
    "config not an object": "JSON object",
}


@pytest.mark.parametrize("name", list(DAMAGES))
def test_a_damaged_or_mismatched_checkpoint_is_refused_in_one_line(target, tmp_path, name):
    folder = _damage(name, target, tmp_path)
    with pytest.raises(EagleCheckpointError, match=DAMAGES[name]) as caught:
        load_eagle(folder, target)
    assert "\n" not in str(caught.value)


def test_a_folder_that_is_no_checkpoint_and_a_missing_one_are_refused(target, tmp_path):
    with pytest.raises(EagleCheckpointError, match="no config.json"):
        load_eagle(tmp_path, target)
    with pytest.raises(EagleCheckpointError, match="no config.json"):
        load_eagle(tmp_path / "nowhere", target)


def test_specvizs_own_heads_round_trip_with_their_shortlist(target, tokenizer, tmp_path):
    shortlist = torch.arange(0, target.vocab_size, 2)
    head = random_head(target, shortlist=shortlist)
    folder = save_eagle(head, tmp_path / "ours", target.name)
    loaded, layers = load_eagle(folder, target)
    assert torch.equal(loaded.shortlist, shortlist) and layers == (-1,)
    for key, value in head.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    hidden = torch.randn(3, H)
    assert torch.allclose(loaded.logits(hidden), target.model.lm_head(hidden)[:, shortlist], atol=1e-5)
    ids = tokenizer.encode("w7 w8 w9")
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=25)))
    events = list(generate(target, ids, Settings(max_new_tokens=25, gamma=4), EagleDrafter(loaded, layers)))
    assert generated_ids(events) == plain
    assert all(t % 2 == 0 for e in events for c in (e.candidates or []) for t in c)


def test_a_published_eagle3_head_of_llama_layers_drafts_for_a_qwen3_target(tmp_path):
    """EAGLE-3 heads are published as Llama layers (no q_norm, k_norm) for targets of other families, Qwen3 among
    them: such a head loads for a Qwen3 target and its drafts keep greedy output."""
    from tiny import loaded, tiny_qwen3, word_tokenizer

    tok = word_tokenizer([f"w{i}" for i in range(40)])
    target = loaded(tiny_qwen3(len(tok), seed=1), tok, "tiny-qwen3")
    vocab = target.vocab_size
    head, layers = load_eagle(eagle3_folder(tmp_path / "e3", vocab, 10), target)
    assert head.layout == "eagle3" and type(head.midlayer).__name__ == "LlamaDecoderLayer"
    ids = tok.encode("w1 w2 w3 w4")
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=30)))
    events = list(generate(target, ids, Settings(max_new_tokens=30, gamma=3), EagleDrafter(head, layers)))
    assert generated_ids(events) == plain and any(e.proposed for e in events)


class LargestTensor(TorchDispatchMode):
    """While on, the bytes of the largest tensor torch makes in memory (the meta device, which holds only shapes,
    is not counted)."""

    def __init__(self):
        super().__init__()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                self.bytes = max(self.bytes, t.numel() * t.element_size())
        return out


def valid_folder(layout: str, target, folder):
    """A head that loads: the published EAGLE-1/2 or EAGLE-3 layout, or specviz's own (with a shortlist)."""
    vocab = target.vocab_size
    if layout == "eagle1":
        return write(folder, eagle1_shapes(vocab), config(vocab), "safetensors")
    if layout == "eagle3":
        return eagle3_folder(folder, vocab, 20)
    return save_eagle(random_head(target, shortlist=torch.arange(0, vocab, 2)), folder, target.name)


OVERSIZED = [  # a config field far beyond the tiny weights: built as stated, each asks for gigabytes
    ("eagle1", "intermediate_size", 1_000_000),
    ("eagle1", "num_attention_heads", 250_000),
    ("eagle1", "num_key_value_heads", 250_000),
    ("eagle1", "head_dim", 1_000_000),
    ("eagle1", "hidden_size", 1_000_000),
    ("eagle3", "intermediate_size", 1_000_000),
    ("ours", "intermediate_size", 1_000_000),
]


@pytest.mark.parametrize("layout, field, size", OVERSIZED, ids=[f"{lay}-{f}" for lay, f, _ in OVERSIZED])
def test_a_config_whose_sizes_are_far_beyond_its_weights_is_refused_quickly_without_building_them(
    target, tmp_path, layout, field, size
):
    folder = valid_folder(layout, target, tmp_path / "good")
    start = time.perf_counter()
    load_eagle(folder, target)
    valid_seconds = time.perf_counter() - start
    saved = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**saved, field: size}))
    start, largest = time.perf_counter(), LargestTensor()
    with largest, pytest.raises(EagleCheckpointError, match="has shape|width") as caught:
        load_eagle(folder, target)
    seconds = time.perf_counter() - start
    assert "\n" not in str(caught.value)
    assert largest.bytes < 16 * 2**20, (
        f"a tensor of {largest.bytes / 2**20:.0f} MiB was made for weights that do not fit"
    )
    assert seconds < valid_seconds + 5, f"refused after {seconds:.1f} s (a valid head loads in {valid_seconds:.2f} s)"
