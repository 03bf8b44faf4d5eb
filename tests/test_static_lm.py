"""The GPU fast path's static KV cache, run here on the CPU (fp32, eager; CUDA graphs need a GPU): every
operation must give what the dynamic cache gives, and whole generations must be the same tokens."""

from types import SimpleNamespace

import pytest
import torch
from tiny import loaded, perturbed, tiny_llama

from specviz.drafters.medusa.medusa_drafter import MedusaDrafter
from specviz.drafters.registry import build_drafter, kinds
from specviz.engine import generate, new_generator
from specviz.engine.cached_lm import CachedLM
from specviz.engine.static_lm import STATIC_ON_CPU_FROM, StaticLM, graphs_allowed, open_lm, wants_static
from specviz.engine.tree import build_tree
from specviz.errors import InvalidRequest
from specviz.events import generated_ids
from specviz.settings import Settings


def same(a, b):
    assert torch.allclose(a, b, atol=1e-4, rtol=1e-5)  # fp32 round-off: the two caches attend over different lengths
    assert torch.equal(a.argmax(-1), b.argmax(-1))


def test_every_cache_operation_matches_the_dynamic_cache(target):
    static, dynamic = StaticLM(target.model, 64, keep_hidden=True), CachedLM(target.model, keep_hidden=True)
    script = [
        ("extend", torch.tensor([5, 9, 13, 2, 40]), True),
        ("extend", torch.tensor([41, 7, 7, 30]), False),
        ("truncate", 6),  # a rejected draft: the static cache keeps the stale entries, masked
        ("extend", torch.tensor([22, 11]), False),
        ("tree", 3, build_tree([[20, 21], [22, 23, 24], [20, 25]])),
        ("keep", 9, [3, 4]),  # the middle path 22 23: entries move in place
        ("extend", torch.tensor([8]), False),
        ("tree", 4, build_tree([[30]])),
        ("keep", 13, []),  # only the root stays (every candidate rejected)
        ("extend", torch.tensor([1, 2, 3]), False),
    ]
    for op, *args in script:
        if op == "extend":
            same(static.extend(*args), dynamic.extend(*args))
        elif op == "tree":
            same(static.extend_tree(*args), dynamic.extend_tree(*args))
        else:
            getattr(static, op)(*args), getattr(dynamic, op)(*args)
        assert static.length == dynamic.length
        assert torch.allclose(static.last_hidden, dynamic.last_hidden, atol=1e-5)


def test_a_forward_past_the_capacity_is_refused(target):
    lm = StaticLM(target.model, 8)
    lm.extend(torch.tensor([1, 2, 3, 4, 5, 6]))
    with pytest.raises(InvalidRequest, match="holds 8 tokens"):
        lm.extend(torch.tensor([7, 8, 9]))


def test_the_fast_path_is_chosen_on_cuda_for_long_contexts_or_when_forced(tokenizer, monkeypatch):
    model = tiny_llama(len(tokenizer), seed=1)
    assert not wants_static(model, 16) and type(open_lm(model, 16)) is CachedLM  # CPU, short: the dynamic cache
    assert type(open_lm(model, STATIC_ON_CPU_FROM)) is StaticLM  # CPU, long: allocated once
    model.specviz_static = False
    assert type(open_lm(model, STATIC_ON_CPU_FROM)) is CachedLM
    model.specviz_static = True
    assert type(open_lm(model, 16)) is StaticLM
    assert not graphs_allowed(torch.device("cpu"))
    assert graphs_allowed(torch.device("cuda"))
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")  # ZeroGPU: static cache, eager, no graphs
    assert not graphs_allowed(torch.device("cuda"))
    # flash attention ignores the mask that hides the static cache's stale tail: such a model keeps the dynamic cache
    flash = SimpleNamespace(
        config=SimpleNamespace(_attn_implementation="flash_attention_2"),
        device=torch.device("cuda"),
        specviz_static=True,
    )
    assert not wants_static(flash)


@pytest.fixture(scope="module")
def static_pair(tokenizer):
    """A target and a partly agreeing draft, both forced onto the static cache."""
    target = loaded(tiny_llama(len(tokenizer), seed=1), tokenizer, "static-target")
    draft = loaded(perturbed(target.model, seed=3, scale=0.3), tokenizer, "static-draft")
    for m in (target, draft):
        m.model.specviz_static = True
    return target, draft


def random_dflash(model):
    """A DFlash drafter (random weights, block 4) for a tiny target; its mask token is the target's last id."""
    from tiny import dflash_config

    from specviz.drafters.dflash.dflash_checkpoint import build_draft

    torch.manual_seed(0)
    layers = (0, model.config.num_hidden_layers - 1)
    return build_draft(dflash_config(model, 4, model.config.vocab_size - 1, target_layers=layers), model).eval()


def tiny_drafter(kind: str, settings, generator, target, draft):
    """Any drafter on the registry's menu for a tiny target; the ones that read heads get heads made for it."""
    from test_eagle import random_head
    from test_medusa_drafter import copying_heads

    if kind == "medusa":
        return MedusaDrafter(copying_heads(target))
    options = {"candidates": 3, "eagle": (random_head(target), (-1,)), "dflash": random_dflash(target.model)}
    return build_drafter(kind, settings, generator, target, draft, options)


# The fast tier's drafters: a chain with a cache of its own and a tree; every other drafter's run is in the slow tier.
FAST_KINDS = ("draft", "medusa")


@pytest.mark.parametrize("kind", FAST_KINDS)
def test_static_generations_equal_dynamic_ones(static_pair, target, drafts, tokenizer, kind):
    static_equals_dynamic(static_pair, target, drafts, tokenizer, kind)


@pytest.mark.parametrize("kind", [k.name for k in kinds(menu_only=True) if k.name not in FAST_KINDS])
def test_static_generations_equal_dynamic_ones_for_every_drafter(
    thorough, static_pair, target, drafts, tokenizer, kind
):
    static_equals_dynamic(static_pair, target, drafts, tokenizer, kind)


def static_equals_dynamic(static_pair, target, drafts, tokenizer, kind):
    """Greedy and sampled runs on the static cache give what the dynamic cache gives, greedy ones plain decoding's."""
    static_target, static_draft = static_pair
    ids = tokenizer.encode("w5 w5 w5 w5 w5 w5 w9 w8 w7 w5 w5")
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=40)))
    for temperature in (0.0, 0.7):
        settings = Settings(max_new_tokens=40, gamma=3, temperature=temperature, seed=5)
        runs = []
        for t, d in ((static_target, static_draft), (target, drafts["partial"])):
            generator = new_generator(t.device, settings.seed)
            drafter = tiny_drafter(kind, settings, generator, t, d)
            runs.append(generated_ids(generate(t, ids, settings, drafter, generator)))
        assert runs[0] == runs[1], f"T={temperature}"
        if temperature == 0:
            assert runs[0] == plain


def test_a_graph_capture_that_fails_falls_back_to_eager_forwards(target):
    """On the CPU a capture genuinely fails (no CUDA streams): the forward still gives the right logits."""
    static, dynamic = StaticLM(target.model, 32), CachedLM(target.model)
    static.graphs_on = True
    same(static.extend(torch.tensor([5, 9, 13])), dynamic.extend(torch.tensor([5, 9, 13])))  # prefill: eager
    with pytest.warns(UserWarning, match="CUDA graph capture failed, running eagerly"):
        same(static.extend(torch.tensor([41, 7])), dynamic.extend(torch.tensor([41, 7])))
    assert not static.graphs_on
    same(static.extend(torch.tensor([3])), dynamic.extend(torch.tensor([3])))


def test_a_static_cache_and_its_graphs_outlive_a_generation_and_are_never_shared(target, tokenizer):
    """Generations of one model reuse the slot (cache, captured graphs) a finished one left, with output identical to
    the dynamic cache's; two at once (a race's two sides) get two slots; a generation stopped midway gives its back."""
    import gc

    from specviz.engine.loop import generate
    from specviz.engine.static_lm import free_slots, warm_graphs
    from specviz.settings import Settings

    model = tiny_llama(len(tokenizer), seed=1)
    target_static = loaded(model, tokenizer)
    model.specviz_static = True
    prompt, settings = [3, 4, 5, 6], Settings(max_new_tokens=30)
    first = [t for e in generate(target_static, prompt, settings) for t in e.tokens]
    ((key, free),) = free_slots(model).items()
    assert key == (256, ()) and len(free) == 1  # rounded up to 256 entries, and given back
    slot = free[0]
    again = [t for e in generate(target_static, prompt, settings) for t in e.tokens]
    assert again == first and free == [slot]  # the same slot served the second generation
    model.specviz_static = False
    assert [t for e in generate(target_static, prompt, settings) for t in e.tokens] == first  # dynamic cache agrees
    model.specviz_static = True
    one, two = generate(target_static, prompt, settings), generate(target_static, prompt, settings)
    next(one), next(two)  # both under way: two slots
    assert free == [] and len(free_slots(model)[key]) == 0
    one.close(), two.close()
    del one, two
    gc.collect()
    assert len(free) == 2 and slot in free
    assert warm_graphs(model) == 2 and len(free) == 2  # every free slot warmed (eagerly here: no CUDA) and back
