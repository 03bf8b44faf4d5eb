"""The llama.cpp runtime behind the engine's model interface: every position's logits of one forward, the cache cut
back to the accepted prefix, trees through sequences, a drafter's own tree, and many rows in one batch; each checked
against the same tokens run another way, on a tiny model written as a GGUF (tests/tiny_gguf.py)."""

import pytest
import torch

from specviz.engine import generate
from specviz.engine.tree import build_tree
from specviz.events import generated_ids
from specviz.runs import generate_named
from specviz.settings import Settings

TEXT = [5, 9, 13, 2, 40, 7, 21, 33]


def fresh(model, ids: list[int]) -> torch.Tensor:
    """[n, V] logits of `ids` read from an empty cache, one token per forward (as plain decoding computes each)."""
    lm = model.open_lm(len(ids) + 1)
    return torch.cat([lm.extend(torch.tensor([t])) for t in ids])


def near(a: torch.Tensor, b: torch.Tensor, share: float = 1e-3) -> bool:
    """The same tokens through forwards of different widths: llama.cpp's kernels for one row and for several round
    apart (and its float16 cache keeps what they wrote), by far less than a wrong cache entry or position would move
    them (the tests check that such a mistake is not near)."""
    return bool((a - b).abs().max() <= share * b.abs().max())


def test_the_gguf_is_the_transformers_model(gguf_pair, target):
    """The runtime reads every position's logits of one forward, and they are the model's: the tiny Llama written as a
    GGUF gives transformers' logits (llama.cpp keeps keys and values in float16, hence the tolerance)."""
    got = gguf_pair["target"].model.open_lm(16).extend(torch.tensor(TEXT))
    want = target.model(torch.tensor([TEXT])).logits[0]
    assert got.shape == want.shape and near(got, want, share=1e-3)


def test_a_multi_token_forward_gives_each_positions_logits(gguf_pair):
    model = gguf_pair["target"].model
    assert near(model.open_lm(16).extend(torch.tensor(TEXT)), fresh(model, TEXT))
    last = model.open_lm(16).extend(torch.tensor(TEXT), last_only=True)
    assert last.shape[0] == 1 and near(last, fresh(model, TEXT)[-1:])


def test_rollback_forgets_exactly_the_cut_tokens(gguf_pair):
    model = gguf_pair["target"].model
    lm = model.open_lm(32)
    lm.extend(torch.tensor(TEXT[:5]))
    lm.extend(torch.tensor([50, 51, 52]))  # a rejected draft
    lm.truncate(5)
    assert lm.length == 5
    assert torch.equal(lm.extend(torch.tensor(TEXT[5:6])), fresh(model, TEXT[:6])[-1:])


def test_every_tree_node_sees_its_own_path_and_the_accepted_path_is_kept(gguf_pair):
    model = gguf_pair["target"].model
    tree = build_tree([(9, 13, 2), (9, 40), (33, 7, 21, 5)])
    lm = model.open_lm(32)
    lm.extend(torch.tensor(TEXT[:3]))
    logits = lm.extend_tree(TEXT[3], tree)
    assert logits.shape[0] == 1 + len(tree.tokens)
    for node in range(len(tree.tokens)):
        path = [tree.tokens[n] for n in tree.shape.path_to(node)]
        assert near(logits[1 + node], fresh(model, TEXT[:4] + path)[-1]), node
        assert not near(logits[1 + node], fresh(model, TEXT[:4] + path[1:])[-1]), node  # a path missing its head
    accepted = tree.shape.path_to(tree.tokens.index(40))  # 9, then 40
    lm.keep(4, accepted)
    assert lm.length == 6
    after = lm.extend(torch.tensor([17]))
    assert near(after, fresh(model, TEXT[:4] + [9, 40, 17])[-1:])


def test_a_drafters_own_tree_rows_see_the_prefix_and_their_ancestors(gguf_pair):
    model = gguf_pair["draft"].model
    lm = model.open_lm(32)
    lm.extend(torch.tensor(TEXT[:4]))
    first = lm.extend_branches([11, 12], [4, 4], 4, [[], []])  # two children of the committed text
    second = lm.extend_branches([13, 14], [5, 5], 4, [[4], [5]])  # a child of each
    assert near(first[0], fresh(model, TEXT[:4] + [11])[-1]) and near(first[1], fresh(model, TEXT[:4] + [12])[-1])
    assert near(second[0], fresh(model, TEXT[:4] + [11, 13])[-1])
    assert near(second[1], fresh(model, TEXT[:4] + [12, 14])[-1])
    lm.truncate(4)
    assert lm.length == 4 and near(lm.extend(torch.tensor([19])), fresh(model, TEXT[:4] + [19])[-1:])


PROMPTS = ["w1 w2 w3 w4 w1 w2 w3 w4 w1 w2", "w5 w9 w33", "w7 w7 w7 w7 w8"]
RUNS = [
    ("draft", {}, Settings(max_new_tokens=32, gamma=3)),
    ("draft", {"draft_tree": "tree"}, Settings(max_new_tokens=32, gamma=4)),
    ("draft", {}, Settings(max_new_tokens=32, gamma=6, adaptive=True)),
    ("ngram", {}, Settings(max_new_tokens=32, gamma=4)),
    ("history", {}, Settings(max_new_tokens=32, gamma=5)),
    ("suffix", {}, Settings(max_new_tokens=32, gamma=4)),
    ("hybrid", {}, Settings(max_new_tokens=32, gamma=4)),
]


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("drafter, options, settings", RUNS, ids=lambda v: str(v) if isinstance(v, str) else None)
def test_greedy_speculative_decoding_on_llama_cpp_writes_plain_decodings_tokens(
    gguf_pair, tokenizer, prompt, drafter, options, settings
):
    """Every drafter that needs only token logits, on the llama.cpp runtime: the speculative side writes what plain
    decoding writes (the tiny model's choices are clear, so no near tie can tip a multi-token verify)."""
    target, draft = gguf_pair["target"], gguf_pair["draft"]
    ids = tokenizer.encode(prompt)
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=32)))
    events = list(generate_named(target, ids, settings, drafter, draft, options, explain=False))
    assert generated_ids(events) == plain
    if drafter == "draft" and not settings.adaptive:
        assert any(e.accepted for e in events)  # the draft really drafted, and its drafts held
    if options.get("draft_tree") == "tree":
        assert any(e.candidates for e in events)  # verified as trees, through sequences


@pytest.mark.parametrize("drafter", ["none", "ngram", "draft"])
def test_rows_decoded_together_write_what_each_writes_alone(gguf_pair, tokenizer, drafter):
    """Many requests at once on llama.cpp: one sequence per row, every row's feed in one forward, two rows leaving
    as they finish and a third joining after them."""
    from specviz.drafters.registry import build_row_drafting
    from specviz.engine.admission import Admission
    from specviz.engine.loop import generate_rows, new_generator

    target, draft = gguf_pair["target"], gguf_pair["draft"]
    prompts = [tokenizer.encode(p) for p in PROMPTS]
    settings = Settings(max_new_tokens=24, gamma=3)
    alone = [generated_ids(generate(target, p, settings)) for p in prompts]
    generators = [new_generator(target.device, r) for r in range(len(prompts))]
    drafting = build_row_drafting(drafter, settings, generators, target, draft, concurrent=True)
    admission = Admission([0.0, 0.0, 0.0], max_rows=2)  # the third joins when a row leaves
    out = {r: [] for r in range(len(prompts))}
    for row, event in generate_rows(target, prompts, settings, drafting, generators, admission=admission):
        out[row] += event.tokens
    assert [out[r] for r in range(len(prompts))] == alone


def test_a_prompt_is_read_as_llama_cpps_tools_read_it_and_its_last_token_is_not_fed_twice(gguf_pair):
    """The prompt read whole (its last token too), as llama-completion reads it; the first step then takes that
    token's logits as read and feeds only what follows: a plain step, a chain and a tree alike."""
    model = gguf_pair["target"].model
    whole = model.open_lm(32).extend(torch.tensor(TEXT), last_only=True)
    for feed in ([], [9, 13], "tree"):
        lm = model.open_lm(32)
        lm.read_prompt(TEXT)
        assert lm.length == len(TEXT) - 1  # the engine's view: every token but the root
        if feed == "tree":
            tree = build_tree([(9, 13), (40,)])
            logits = lm.extend_tree(TEXT[-1], tree)
            assert torch.equal(logits[0], whole[0]) and logits.shape[0] == 1 + len(tree.tokens)
            assert near(logits[1 + tree.tokens.index(40)], fresh(model, [*TEXT, 40])[-1])
            lm.keep(len(TEXT), [tree.tokens.index(40)])
            assert near(lm.extend(torch.tensor([5]))[0], fresh(model, [*TEXT, 40, 5])[-1])
            continue
        logits = lm.extend(torch.tensor([TEXT[-1], *feed]))
        assert torch.equal(logits[0], whole[0]) and lm.length == len(TEXT) + len(feed)
        if feed:
            assert near(logits[-1], fresh(model, [*TEXT, *feed])[-1])
    lm = model.open_lm(32)
    lm.read_prompt(TEXT)
    lm.truncate(3)  # a rollback before the root: the root read with the prompt goes with the rest
    assert near(lm.extend(torch.tensor(TEXT[3:5]))[-1], fresh(model, TEXT[:5])[-1])


def test_a_cost_curve_the_physics_forbids_is_measured_again_and_never_kept(gguf_pair, tmp_path, monkeypatch):
    """A forward over k tokens costs at most about k one-token forwards, and a wider one never much less than a
    narrower one: a curve outside that (measured while the machine was busy) is measured again, and when every
    attempt is implausible it serves this run only, so the next load measures afresh."""
    from specviz.runtimes.llama_cpp import forward_costs

    assert forward_costs.implausible({1: 0.11, 2: 0.72, 4: 0.38, 8: 1.21, 16: 1.63})  # measured beside a compiler
    assert forward_costs.implausible({1: 0.03, 2: 0.05, 4: 0.03, 8: 0.2})  # 4 tokens cheaper than 2
    for kept in ({1: 0.0277, 2: 0.0515, 4: 0.089, 8: 0.186, 16: 0.254}, {1: 0.121, 2: 0.110, 4: 0.107, 8: 0.119}):
        assert forward_costs.implausible(kept) == ""  # llama.cpp Q4's shape, and bfloat16's cheaper two tokens
    model = gguf_pair["target"].model
    timed = iter([{1: 1.0, 2: 9.0}, {1: 1.0, 2: 9.0}, {1: 1.0, 2: 1.5}, {1: 1.0, 2: 9.0}, {1: 1.0, 2: 9.0}] * 2)
    monkeypatch.setattr(forward_costs, "measure", lambda m: next(timed))
    said = []
    assert forward_costs.forward_curve(model, said.append, tmp_path) == {1: 1.0, 2: 1.5}  # the third: plausible
    assert len(said) == 3 and "moved" in said[1] and forward_costs.kept_curve(model.path, tmp_path)[0][2] == 1.5
    (tmp_path / forward_costs.COSTS_FILE).unlink()
    assert forward_costs.forward_curve(model, said.append, tmp_path) == {1: 1.0, 2: 9.0}  # never plausible
    assert forward_costs.kept_curve(model.path, tmp_path) is None
