"""runs.py: the one place a pair is opened and a duel decoded, with where its sides parted and its trace."""

import pytest

from specviz.bench.measure import measure
from specviz.errors import SpecvizError
from specviz.events import PLAIN, generated_ids
from specviz.models.exact import EXACT_ON
from specviz.runs import Duel, generate_named
from specviz.runtimes.pair import Pair, PairAsk, open_pair
from specviz.settings import Settings
from specviz.trace import RunModels, Trace

PROMPT = [1, 5, 9, 13]


def test_a_duel_keeps_both_sides_and_its_trace_reads_back(target, drafts, tmp_path):
    settings = Settings(max_new_tokens=24, gamma=3)
    duel = Duel(Pair(target, drafts["partial"]), PROMPT, settings, "draft")
    spec = list(duel.speculative())
    plain = list(duel.plain())
    assert duel.spec_events == spec and duel.plain_events == plain
    assert duel.spec_ids() == generated_ids(plain) and duel.parted() is None
    assert any(e.proposed for e in spec) and all(e.detail is not None for e in spec if e.proposed)
    models = RunModels(target="tiny", draft="tiny-partial", pair="tiny ← tiny-partial", precision="float32")
    duel.trace("a prompt", models, "a test").save(tmp_path / "run.json")
    back = Trace.load(tmp_path / "run.json")
    assert [s.name for s in back.sides] == [PLAIN, "draft"]
    assert generated_ids(back.sides[1].events) == duel.spec_ids() and back.sides[1].divergence is None


def test_where_greedy_sides_part_is_found_and_sampled_sides_are_not_compared(target, drafts):
    duel = Duel(Pair(target, drafts["partial"]), PROMPT, Settings(max_new_tokens=12, gamma=3), "draft")
    list(duel.speculative())
    plain = duel.spec_ids()
    other = [*plain[:4], (plain[4] + 1) % 50, *plain[5:]]
    found = duel.parted(other)
    assert found is not None and found.position == 4
    sampled = Duel(Pair(target, drafts["partial"]), PROMPT, Settings(max_new_tokens=12, temperature=0.8), "draft")
    list(sampled.speculative())
    assert sampled.parted(other) is None


def test_a_run_nobody_watches_step_by_step_records_no_step_detail(target, drafts):
    settings = Settings(max_new_tokens=16, gamma=3)
    shown = list(generate_named(target, PROMPT, settings, "draft", drafts["partial"]))
    bare = list(generate_named(target, PROMPT, settings, "draft", drafts["partial"], explain=False))
    assert generated_ids(bare) == generated_ids(shown)
    assert any(e.detail for e in shown) and not any(e.detail for e in bare)
    assert not any(e.detail for e in measure(target, PROMPT, settings, "draft", drafts["partial"]).events)


def test_a_bad_option_fails_when_the_side_is_asked_for_not_at_its_first_step(target):
    duel = Duel(Pair(target), PROMPT, Settings(max_new_tokens=8), "ngram", {"ngram_min": -3})
    with pytest.raises(SpecvizError):
        duel.speculative()


def test_a_pair_opens_from_folders_with_exact_mode_as_asked(pair_folders):
    target_folder, draft_folder = pair_folders
    pair = open_pair(PairAsk(str(target_folder), str(draft_folder), dtype="bfloat16", device="cpu", exact=True))
    assert pair.draft is not None and pair.exact == EXACT_ON
    assert pair.choose_exact(False) == "exact mode off"
    alone = open_pair(PairAsk(str(target_folder), dtype="float32", device="cpu", exact=True))
    assert alone.draft is None and alone.exact.startswith("exact mode off: ")
