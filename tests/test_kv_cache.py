"""The KV cache adapter against the installed transformers, on tiny real Llama and Qwen2 models (fp32): cropping,
compaction and a static cache's write position must give exactly the entries a cache filled from scratch holds;
a cache whose fields changed must raise CacheLayoutChanged; a model whose attention cannot take a custom 4D mask
must be refused before any forward, the default (sdpa) and eager ones must pass."""

from types import SimpleNamespace

import pytest
import torch
import transformers
from tiny import same_up_to_rows, tiny_llama
from transformers import Qwen2Config, Qwen2ForCausalLM

from specviz.engine.cached_lm import CachedLM
from specviz.engine.kv_cache import KVCache, takes_custom_mask
from specviz.engine.static_lm import StaticLM
from specviz.engine.tree import build_tree
from specviz.errors import CacheLayoutChanged, CustomMaskUnsupported, TreeAttentionUnsupported

VOCAB = 40
SEQ = torch.tensor([[5, 9, 13, 2, 30, 31, 7, 7, 22, 11]])


def tiny_qwen2(seed: int) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    return Qwen2ForCausalLM(config).float().eval()


@pytest.fixture(autouse=True)
def inference():
    """specviz runs every cache operation in inference mode (in place on inference tensors): so do these tests."""
    with torch.inference_mode():
        yield


@pytest.fixture(params=["llama", "qwen2"])
def model(request):
    return tiny_llama(VOCAB, seed=11) if request.param == "llama" else tiny_qwen2(seed=11)


def filled(model, ids: torch.Tensor) -> KVCache:
    """A dynamic cache filled by one plain forward over [1, n] ids."""
    kv = KVCache.dynamic(model)
    model(input_ids=ids, past_key_values=kv.cache, use_cache=True)
    return kv


def layer_tensors(kv: KVCache, end: int | None = None) -> list[torch.Tensor]:
    """Every layer's keys and values (entries up to `end`), read straight from transformers' fields."""
    return [t[..., :end, :] for layer in kv.cache.layers for t in (layer.keys, layer.values)]


def assert_same_entries(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert x.shape == y.shape and torch.equal(x, y)


def test_a_cropped_cache_holds_exactly_the_kept_entries_and_continues_like_a_fresh_one(model):
    kv = filled(model, SEQ)
    before = [t.clone() for t in layer_tensors(kv)]
    kv.crop(6)
    assert kv.entries() == 6
    assert_same_entries(layer_tensors(kv), [t[..., :6, :] for t in before])
    kv.crop(6)  # cropping to the length held changes nothing
    assert kv.entries() == 6
    after = model(input_ids=SEQ[:, 6:], past_key_values=kv.cache, use_cache=True).logits
    fresh = model(input_ids=SEQ).logits[:, 6:]
    assert same_up_to_rows(after, fresh) and torch.equal(after.argmax(-1), fresh.argmax(-1))


def test_compaction_moves_the_kept_entries_to_contiguous_positions(model):
    kv = filled(model, SEQ)
    before = [t.clone() for t in layer_tensors(kv)]
    kept = torch.tensor([6, 8, 9])
    kv.compact(4, kept)
    kv.crop(7)
    assert kv.entries() == 7
    assert_same_entries(layer_tensors(kv), [torch.cat([t[..., :4, :], t[..., kept, :]], dim=-2) for t in before])


def test_compacting_a_tree_path_gives_the_entries_of_that_path_run_alone(model):
    lm = CachedLM(model)
    lm.extend(SEQ[0, :4], last_only=True)
    lm.extend_tree(30, build_tree([[31, 32], [33, 34, 35]]))
    lm.keep(5, [2, 3, 4])  # the root stays at 4, the path 33 34 35 moves to 5, 6, 7
    path = torch.tensor([[*SEQ[0, :4].tolist(), 30, 33, 34, 35]])
    fresh = filled(model, path)
    assert lm.length == lm.kv.entries() == 8
    for ours, theirs in zip(layer_tensors(lm.kv), layer_tensors(fresh)):
        assert same_up_to_rows(ours, theirs)


def test_a_static_cache_writes_where_its_write_position_says(model):
    kv = KVCache.static(model, capacity=16)
    assert not kv.is_allocated()
    columns = torch.arange(16)

    def forward(ids: torch.Tensor, start: int) -> torch.Tensor:  # every row sees the entries up to itself only
        rows = start + torch.arange(ids.shape[-1])
        mask = torch.where(columns[None, :] <= rows[:, None], 0.0, torch.finfo(torch.float32).min)
        kv.set_write_position(start)
        out = model(input_ids=ids, position_ids=rows[None], attention_mask=mask[None, None], past_key_values=kv.cache)
        return out.logits

    forward(SEQ[:, :8], 0)
    assert kv.is_allocated()
    stale = [t.clone() for t in layer_tensors(kv)]
    again = forward(SEQ[:, 8:], 5)  # a rollback to 5: entries 5 and 6 are overwritten, 7 on stay as they were
    assert_same_entries(layer_tensors(kv, 5), [t[..., :5, :] for t in stale])
    assert_same_entries([t[..., 7:, :] for t in layer_tensors(kv)], [t[..., 7:, :] for t in stale])
    fresh = filled(model, torch.cat([SEQ[:, :5], SEQ[:, 8:]], dim=-1))
    for ours, theirs in zip(layer_tensors(kv, 7), layer_tensors(fresh)):
        assert same_up_to_rows(ours, theirs)
    expected = model(input_ids=torch.cat([SEQ[:, :5], SEQ[:, 8:]], dim=-1)).logits[:, 5:]
    assert same_up_to_rows(again, expected)


def test_the_layout_probe_runs_until_the_layers_are_allocated_then_never_again(model, monkeypatch):
    kv = KVCache.dynamic(model)
    probes = []
    original = KVCache._check
    monkeypatch.setattr(KVCache, "_check", lambda self: probes.append(1) or original(self))
    kv.crop(0)  # layers not allocated yet: probed, not settled
    model(input_ids=SEQ, past_key_values=kv.cache, use_cache=True)
    kv.crop(9)
    kv.compact(2, torch.tensor([4, 5]))
    kv.crop(4)
    assert len(probes) == 2 and kv.entries() == 4


def changed(field: str):
    """A probe must name the installed transformers and the field that changed."""
    return pytest.raises(CacheLayoutChanged, match=rf"transformers {transformers.__version__}.*{field}")


def test_a_cache_without_layers_is_refused():
    kv = KVCache(SimpleNamespace(crop=print, get_seq_length=int))  # a cache whose layers went elsewhere
    with changed("layers"):
        kv.crop(0)


def test_a_layer_whose_keys_moved_is_refused_before_compaction(model):
    kv = filled(model, SEQ)
    kv.cache.layers[1].__dict__["key_states"] = kv.cache.layers[1].__dict__.pop("keys")  # a renamed field
    with changed("keys"):
        kv.compact(2, torch.tensor([4, 5]))


def test_a_layer_without_an_initialised_flag_is_refused(model):
    kv = filled(model, SEQ)
    del kv.cache.layers[0].is_initialized
    with changed("is_initialized"):
        kv.crop(4)


def test_a_crop_that_means_something_else_is_refused(model):
    kv = filled(model, SEQ)
    kv.cache.crop = lambda new_length: None  # e.g. a crop that reads its argument as the length to keep
    with changed("crop"):
        kv.crop(4)


def test_a_static_layer_without_a_write_position_is_refused(model):
    kv = KVCache.static(model, capacity=16)
    del kv.cache.layers[0].cumulative_length
    with changed("cumulative_length"):
        kv.set_write_position(0)


NO_CUSTOM_MASK = ["flash_attention_2", "flash_attention_3", "flex_attention", "paged|eager", "kernels-community/x"]


@pytest.mark.parametrize("attention", NO_CUSTOM_MASK)
def test_an_attention_that_cannot_take_a_custom_mask_is_refused_before_any_forward(model, attention):
    lm = CachedLM(model)
    lm.extend(SEQ[0, :4], last_only=True)
    model.config._attn_implementation = attention  # what a model loaded with that attention reports
    assert not takes_custom_mask(model)
    with pytest.raises(TreeAttentionUnsupported, match="tree mask"):
        lm.extend_tree(30, build_tree([[31, 32], [33]]))
    with pytest.raises(TreeAttentionUnsupported, match="tree mask"):
        lm.extend_branches([31, 33], [4, 4], 4, [[], []])
    assert lm.length == lm.kv.entries() == 4  # nothing appended
    with pytest.raises(CustomMaskUnsupported, match=attention):
        StaticLM(model, 16)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_sdpa_and_eager_take_the_tree_mask(model, attention):
    model.set_attn_implementation(attention)
    assert takes_custom_mask(model)
    tree = build_tree([[31, 32], [33]])
    for lm in (CachedLM(model), StaticLM(model, 16)):
        lm.extend(SEQ[0, :4], last_only=True)
        logits = lm.extend_tree(30, tree)
        alone = model(input_ids=torch.tensor([[*SEQ[0, :4].tolist(), 30, 33]])).logits[0, -1]
        assert torch.allclose(logits[3], alone, atol=1e-4) and logits[3].argmax() == alone.argmax()
