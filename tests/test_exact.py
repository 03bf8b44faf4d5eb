"""Exact mode (specviz/models/exact.py): in bfloat16 a verify forward gives each row, bit for bit, what a one-token
forward gives it, so greedy speculative output equals plain decoding's for every drafter on prompts where, without
the mode, a near tie tips it apart; sampling keeps the target's law; where the mode cannot hold it says why."""

import copy

import pytest
import torch
from laws import chain, exact_law
from tiny import dflash_config, loaded, perturbed, tiny_llama

from specviz.drafters.dflash.checkpoint import build_draft
from specviz.drafters.eagle.checkpoint import head_config
from specviz.drafters.eagle.head import EagleHead
from specviz.drafters.medusa.heads import MedusaHeads
from specviz.drafters.suffix_index import RunMemory
from specviz.engine.cached_lm import CachedLM
from specviz.engine.static_lm import StaticLM
from specviz.engine.tree import build_tree, row_after
from specviz.events import generated_ids
from specviz.models.exact import EXACT_ATTENTION, PairedLinear, exact_problem, is_exact, set_exact
from specviz.models.quantize import int8_dynamic
from specviz.runs import decode
from specviz.settings import Settings

# The tiny target's MLP is this wide so that its down projection reads more than 1,024 inputs: there a one-row
# bfloat16 product sums in another order than a product of several rows, as in real models.
WIDE = 2048

# Prompts on which each drafter's greedy output parts from plain decoding's without exact mode (found by a search
# over 80 random prompts of the tiny vocabulary on this project's CPU, with one thread and with two).
PARTING = {
    "draft": ("w6 w11 w40 w46 w55 w18 w7 w47", "w31 w30 w7 w1 w19"),
    "draft tree": ("w51 w54 w52 w59 w16 w2 w53", "w46 w10 w28"),
    "hybrid": ("w16 w7 w31", "w15 w17 w7 w51 w39"),
    "ngram": ("w13 w41 w20", "w1 w0 w50"),
    "history": ("w46 w10 w28", "w1 w0 w50"),
    "suffix": ("w46 w10 w28", "w13 w41 w20"),
    "medusa": ("w16 w7 w31", "w57 w46 w45 w32 w59"),
    "eagle": ("w51 w54 w52 w59 w16 w2 w53", "w13 w17 w43 w6 w53 w24"),
    "dflash": ("w18 w8 w48 w6", "w19 w6 w46 w4"),
}


@pytest.fixture(scope="module")
def wide(tokenizer):
    """(target, draft, Medusa heads, EAGLE head, DFlash drafter of block 4), all in bfloat16; the target in exact mode
    until a test says not."""
    target = loaded(tiny_llama(len(tokenizer), seed=1, intermediate=WIDE).bfloat16(), tokenizer, "tiny-wide")
    draft = perturbed(tiny_llama(len(tokenizer), seed=1, intermediate=WIDE), seed=3, scale=0.3)
    torch.manual_seed(0)
    heads = MedusaHeads(64, target.vocab_size, 4, 1).bfloat16()
    torch.manual_seed(0)
    head = EagleHead(head_config({}, target.model.config), "eagle1", target.model).eval().bfloat16()
    torch.manual_seed(0)
    block = dflash_config(target.model, 4, target.model.config.vocab_size - 1, target_layers=(0, 1))
    dflash = build_draft(block, target.model).eval().bfloat16()
    assert set_exact(target.model, True) == ""
    yield target, loaded(draft.bfloat16(), tokenizer, "tiny-wide-draft"), heads, head, dflash
    set_exact(target.model, False)


@pytest.fixture
def exact(wide, request):
    """The wide target with exact mode as the test's parameter asks (on by default), and on again afterwards."""
    on = getattr(request, "param", True)
    set_exact(wide[0].model, on)
    yield on
    set_exact(wide[0].model, True)


def rows_one_at_a_time(make, prompt: list[int], fed: list[int]) -> list[torch.Tensor]:
    """What plain decoding computes: after the prompt's prefill, one token per forward."""
    lm = make()
    lm.extend(torch.tensor(prompt[:-1]), last_only=True)
    return [lm.extend(torch.tensor([t]))[0] for t in fed]


def caches(model):
    return {"dynamic": lambda: CachedLM(model), "static": lambda: StaticLM(model, 256)}


@pytest.mark.parametrize("exact", [True, False], indirect=True, ids=["exact", "without"])
def test_a_verify_forward_of_k_tokens_gives_the_one_token_forwards_rows(wide, tokenizer, exact):
    target = wide[0]
    prompt = tokenizer.encode("w6 w11 w40 w46 w55 w18 w7")
    drafts = tokenizer.encode("w3 w9 w27 w44 w5 w12 w33 w8 w19 w2 w50 w41 w7 w30 w16")
    same = total = 0
    with torch.inference_mode():
        for plain_cache, make_plain in caches(target.model).items():
            alone = rows_one_at_a_time(make_plain, prompt, [prompt[-1], *drafts])
            for verify_cache, make_verify in caches(target.model).items():
                for k in range(2, 17):
                    lm = make_verify()
                    lm.extend(torch.tensor(prompt[:-1]), last_only=True)
                    rows = lm.extend(torch.tensor([prompt[-1], *drafts[: k - 1]]))
                    matches = [torch.equal(rows[i], alone[i]) for i in range(k)]
                    same, total = same + sum(matches), total + k
                    if exact:
                        assert all(matches), (plain_cache, verify_cache, k, matches)
    if not exact:
        assert same < total  # without the mode some rows come out otherwise: the test can tell


@pytest.mark.parametrize("exact", [True, False], indirect=True, ids=["exact", "without"])
def test_every_node_of_a_tree_gets_its_paths_one_token_rows(wide, tokenizer, exact):
    target = wide[0]
    prompt = tokenizer.encode("w51 w54 w52 w59 w16")
    w = tokenizer.convert_tokens_to_ids
    tree = build_tree(
        [w(["w3", "w9", "w27", "w4"]), w(["w3", "w9", "w5"]), w(["w3", "w40"]), w(["w12", "w13", "w14"]), w(["w8"])]
    )
    same = total = 0
    with torch.inference_mode():
        for name, make in caches(target.model).items():
            lm = make()
            lm.extend(torch.tensor(prompt[:-1]), last_only=True)
            rows = lm.extend_tree(prompt[-1], tree)
            for node in range(len(tree.tokens)):
                path = [tree.tokens[n] for n in tree.path_to(node)]
                alone = rows_one_at_a_time(caches(target.model)["dynamic"], prompt, [prompt[-1], *path])[-1]
                match = torch.equal(rows[row_after(node)], alone)
                same, total = same + match, total + 1
                if exact:
                    assert match, (name, node)
    if not exact:
        assert same < total


def drafter_for(label: str, wide):
    """(registry name, draft model, options) for a PARTING label."""
    target, draft, heads, head, dflash = wide
    return {
        "draft": ("draft", draft, {}),
        "draft tree": ("draft", draft, {"draft_tree": "tree", "draft_nodes": 6}),
        "hybrid": ("hybrid", draft, {}),
        "ngram": ("ngram", None, {}),
        "history": ("history", None, {"candidates": 4}),
        "suffix": ("suffix", None, {}),
        "medusa": ("medusa", None, {"medusa": heads}),
        "eagle": ("eagle", None, {"eagle": (head, (-1,))}),
        "dflash": ("dflash", None, {"dflash": dflash}),
    }[label]


def greedy_pair(wide, tokenizer, label: str, prompt: str) -> tuple[list[int], list[int]]:
    """(plain decoding's tokens, the drafter's) at γ 4, 40 tokens; suffix decoding drafts from plain's run."""
    target = wide[0]
    name, draft, options = drafter_for(label, wide)
    ids, settings = tokenizer.encode(prompt), Settings(max_new_tokens=40, gamma=4)
    plain = generated_ids(decode(target, ids, settings))
    memory = RunMemory() if name == "suffix" else None
    if memory is not None:
        memory.remember(ids, plain)
    return plain, generated_ids(decode(target, ids, settings, name, draft, options, memory=memory))


@pytest.mark.parametrize("label", list(PARTING))
def test_every_drafter_writes_plain_decodings_tokens_in_exact_mode(wide, tokenizer, exact, label):
    for prompt in PARTING[label]:
        plain, spec = greedy_pair(wide, tokenizer, label, prompt)
        assert spec == plain, prompt


@pytest.mark.parametrize("exact", [False], indirect=True, ids=["without"])
@pytest.mark.parametrize("label", list(PARTING))
def test_without_exact_mode_those_prompts_part(wide, tokenizer, exact, label):
    """The prompts above are the ones that tell: without the mode, at least one of each drafter's parts."""
    assert any(plain != spec for plain, spec in (greedy_pair(wide, tokenizer, label, p) for p in PARTING[label]))


@pytest.fixture(scope="module")
def small_bf16(small):
    """`small` (the law tests' vocabulary of 8) in bfloat16, its target in exact mode."""
    target, draft, prompt = small
    bf16 = loaded(copy.deepcopy(target.model).bfloat16(), target.tokenizer, "small-bf16")
    assert set_exact(bf16.model, True) == ""
    return bf16, loaded(copy.deepcopy(draft.model).bfloat16(), target.tokenizer, "small-bf16-draft"), prompt


def test_sampling_in_exact_mode_keeps_the_targets_law(small_bf16, draws):
    target, draft, prompt = small_bf16
    settings = Settings(max_new_tokens=3, gamma=2, temperature=1.0)
    assert draws.p(draws(target, prompt, settings, chain(target, draft)), exact_law(target, prompt, settings)) > 1e-3


def test_where_exact_mode_cannot_hold_it_says_why_in_one_line_and_changes_nothing(target):
    cases = [
        (target.model, "covers bfloat16 targets, and this one is float32"),
        (int8_dynamic(perturbed(target.model, seed=4, scale=0.1)), "covers bfloat16 targets"),
    ]
    with torch.device("meta"):  # a device other than the CPU, without needing one
        elsewhere = tiny_llama(8, seed=0).bfloat16()
    for model, words in cases:
        before = (model.config._attn_implementation, [type(m) for m in model.modules()])
        problem = set_exact(model, True)
        assert words in problem and "\n" not in problem and not is_exact(model)
        assert (model.config._attn_implementation, [type(m) for m in model.modules()]) == before
    assert "checked on CPUs only" in exact_problem(elsewhere)


def test_switching_it_off_gives_the_model_back_as_it_was(tokenizer):
    model = tiny_llama(len(tokenizer), seed=5, intermediate=WIDE).bfloat16()
    before = model.config._attn_implementation
    assert set_exact(model, True) == "" and is_exact(model)
    assert model.config._attn_implementation == EXACT_ATTENTION
    assert all(type(m) is PairedLinear for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert set_exact(model, False) == "" and not is_exact(model)
    assert model.config._attn_implementation == before
    assert not any(type(m) is PairedLinear for m in model.modules())


def test_a_paired_linear_gives_one_row_what_a_product_of_several_rows_gives_it():
    """At a real model's shape (Qwen2.5-1.5B's gate projection), where the one-row kernel sums otherwise."""
    gen = torch.Generator().manual_seed(0)
    layer = torch.nn.Linear(1536, 8960, bias=False).bfloat16()
    x = torch.randn(16, 1536, generator=gen).bfloat16()
    with torch.inference_mode():
        several = torch.nn.functional.linear(x, layer.weight)
        alone = torch.cat([torch.nn.functional.linear(x[i : i + 1], layer.weight) for i in range(16)])
        paired = torch.cat([PairedLinear.forward(layer, x[i : i + 1]) for i in range(16)])
    assert not torch.equal(alone, several)  # the trouble the pairing answers
    assert torch.equal(paired, several)


# SmolLM2-135M in bfloat16: without exact mode, 13-15 of the first 24 prompts of assets/prompts.json part from plain
# decoding within 48 tokens (n-gram lookup, or the model drafting for itself); these two among them.
REAL_PARTING = (
    "Write a Python class `LRUCache` with `get(key)` and `put(key, value)` methods running in O(1) time, using "
    "collections.OrderedDict. Add type hints.",
    "Write a short story, about 150 words, about a lighthouse keeper who finds a message in a bottle.",
)


@pytest.fixture(scope="module")
def smollm_bf16(smollm):
    model = loaded(copy.deepcopy(smollm.model).bfloat16(), smollm.tokenizer, "smollm2-135m-instruct (bf16)")
    yield model
    set_exact(model.model, False)


@pytest.mark.parametrize("name", ["ngram", "draft"])
def test_a_real_model_in_bfloat16_writes_plain_decodings_tokens_only_in_exact_mode(smollm_bf16, name):
    from specviz.models import encode_prompt

    settings, parted = Settings(max_new_tokens=48, gamma=4), []
    for on in (True, False):
        assert set_exact(smollm_bf16.model, on) == ""
        for prompt in REAL_PARTING:
            ids = encode_prompt(smollm_bf16, prompt)
            plain = generated_ids(decode(smollm_bf16, ids, settings))
            spec = generated_ids(decode(smollm_bf16, ids, settings, name, smollm_bf16 if name == "draft" else None))
            if on:
                assert spec == plain, prompt
            else:
                parted.append(spec != plain)
    assert any(parted)
