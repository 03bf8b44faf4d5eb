"""A draft that reads only a window of a long prompt (its opening and its end): it reads exactly those tokens and then
everything generated, its cache stays in step with the text through accepted and rejected drafts, and the output is
still the target's, for the draft model (chain, tree, adaptive) and the hybrid."""

import pytest
import torch

from specviz.drafters.draft_model import DraftModelDrafter, DraftOptions
from specviz.drafters.hybrid import HybridOptions
from specviz.engine import generate
from specviz.engine.step import Verdict
from specviz.errors import InvalidRequest
from specviz.events import generated_ids
from specviz.runs import generate_named
from specviz.settings import Settings

LONG = " ".join(f"w{(7 * i) % 40 + 1}" for i in range(30)) + " w1 w2 w3 w1 w2"  # 35 words: longer than the windows


@pytest.mark.parametrize(
    "options",
    [
        {"draft_window": 12},
        {"draft_window": 12, "draft_tree": "tree", "draft_nodes": 8},
        {"draft_window": 5, "draft_tree": "tree"},
    ],
)
def test_windowed_draft_models_equal_plain(target, drafts, tokenizer, options):
    ids = tokenizer.encode(LONG)
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=40)))
    for which in ("same", "partial"):
        kept = 0
        for settings in (
            Settings(max_new_tokens=40, gamma=1),
            Settings(max_new_tokens=40, gamma=4),
            Settings(max_new_tokens=40, gamma=6, adaptive=True),
        ):
            events = list(generate_named(target, ids, settings, "draft", drafts[which], options))
            assert generated_ids(events) == plain, (which, settings.gamma, settings.adaptive)
            kept += sum(e.accepted for e in events)
        assert kept > 0  # the window still drafts tokens the target keeps


@pytest.mark.parametrize("window", [0, 12])
def test_the_hybrid_with_a_window_equals_plain(target, drafts, tokenizer, window):
    ids = tokenizer.encode(LONG)
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=40)))
    settings = Settings(max_new_tokens=40, gamma=6, adaptive=True)
    events = list(generate_named(target, ids, settings, "hybrid", drafts["partial"], {"hybrid_window": window}))
    assert generated_ids(events) == plain


def _drafter(draft, window):
    return DraftModelDrafter(
        draft,
        Settings(max_new_tokens=16, gamma=3),
        torch.Generator().manual_seed(0),
        draft.vocab_size,
        window=window,
    )


def test_the_draft_reads_the_opening_and_the_end_then_all_that_follows(drafts, tokenizer):
    """A windowed draft proposes what an unwindowed one proposes for the prompt cut to that window, step after step,
    through a partly accepted draft and a fully rejected one."""
    draft = drafts["partial"]
    ids = tokenizer.encode(LONG)
    windowed, reference = _drafter(draft, 12), _drafter(draft, 0)
    cut = ids[:3] + ids[-9:]  # the first quarter of 12 from the opening, the rest from the end
    windowed.start(ids)
    reference.start(cut)
    assert windowed.skipped == len(ids) - 12 and windowed.lm.length == reference.lm.length == 11
    text, text_cut = list(ids), list(cut)
    for accepted, correction in ((2, 5), (0, 9), (3, 2)):
        mine, theirs = windowed.propose(text, 3), reference.propose(text_cut, 3)
        assert mine.candidates == theirs.candidates
        torch.testing.assert_close(mine.q, theirs.q)
        verdict = Verdict(tuple(range(accepted)), correction)
        windowed.observe(verdict)
        reference.observe(verdict)
        added = list(mine.candidates[0][:accepted]) + [correction]
        text, text_cut = text + added, text_cut + added
    assert windowed.lm.length == reference.lm.length


def test_a_prompt_within_the_window_is_read_whole(drafts, tokenizer):
    drafter = _drafter(drafts["partial"], 64)
    ids = tokenizer.encode(LONG)
    drafter.start(ids)
    assert drafter.skipped == 0 and drafter.lm.length == len(ids) - 1


def test_window_options_are_checked():
    with pytest.raises(InvalidRequest, match="draft window must be an integer in 0..8192"):
        DraftOptions(draft_window=-1)
    with pytest.raises(InvalidRequest, match="hybrid draft window must be an integer in 0..8192"):
        HybridOptions(hybrid_window=10**6)
    assert DraftOptions().draft_window == 0 and HybridOptions().hybrid_window == 256
