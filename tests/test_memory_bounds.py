"""A shared Space's memory of visitors' runs is bounded in tokens, per visitor and in all, and goes when they leave;
the pairs visitors name are their own, limited, off on a public Space unless its owner turns them on."""

import random
import time
import tracemalloc

import pytest

from specviz.app import memories as memories_module
from specviz.app.memories import VisitorMemories
from specviz.app.shelf import ModelShelf
from specviz.app.ui.handlers import StopBoard
from specviz.drafters.suffix_index import RunMemory


def text(n: int, rng: random.Random) -> list[int]:
    return [rng.randrange(150_000) for _ in range(n)]  # all n-grams distinct: the index's worst case


def test_a_visitors_memory_keeps_its_newest_runs_within_its_token_budget():
    rng, memory = random.Random(0), RunMemory(64, max_tokens=5_000)
    runs = [(text(100, rng), text(1_900, rng)) for _ in range(4)]
    for prompt, output in runs:
        memory.remember(prompt, output)
    assert memory.tokens <= 5_000 and [r.tokens for r in memory.runs] == [p + o for p, o in runs[-2:]]
    long_prompt, long_output = text(1_000, rng), text(6_000, rng)
    memory.remember(long_prompt, long_output)  # alone longer than the budget: its last 5,000 tokens stay
    (kept,) = memory.runs
    assert kept.tokens == long_output[-5_000:] and kept.prompt_length == 0


def test_all_visitors_together_stay_within_the_total_and_under_1_gib_at_worst(monkeypatch):
    """At a sixteenth of the budgets (a token's cost does not depend on them; the full ones take a minute under
    tracemalloc), more visitors than the total holds fill their budgets with the index's worst case; what a token
    costs, measured, times the real total is the worst a Space holds."""
    full_total = memories_module.TOTAL_TOKENS
    visitor_tokens, total_tokens = memories_module.VISITOR_TOKENS // 16, full_total // 16
    monkeypatch.setattr(memories_module, "VISITOR_TOKENS", visitor_tokens)
    monkeypatch.setattr(memories_module, "TOTAL_TOKENS", total_tokens)
    rng, memories = random.Random(1), VisitorMemories()
    visitors = total_tokens // visitor_tokens + 8
    tracemalloc.start()
    began = time.perf_counter()
    try:
        for visitor in range(visitors):  # each filling their budget with runs of 2,048 tokens
            for _ in range(visitor_tokens // 2_048 + 1):
                memories.remember(f"v{visitor}", text(64, rng), text(1_984, rng))
        held, kept = memories.tokens(), dict(memories.items())
        size = tracemalloc.get_traced_memory()[0]
        assert held <= total_tokens and f"v{visitors - 1}" in kept and "v0" not in kept
        assert all(m.tokens <= visitor_tokens for m in kept.values())
        del kept
        worst = size / held * full_total
        assert worst < 2**30, f"{size / held:.0f} bytes a token: {worst / 2**20:.0f} MiB at the full total"
        print(
            f"{held} tokens held in {size / 2**20:.0f} MiB ({size / held:.0f} bytes a token; "
            f"{worst / 2**20:.0f} MiB at the full total), {time.perf_counter() - began:.1f} s"
        )
        for visitor in [session for session, _ in memories.items()]:  # everyone leaves
            memories.forget(visitor)
        assert not len(memories) and tracemalloc.get_traced_memory()[0] < size / 20
    finally:
        tracemalloc.stop()


def test_a_session_that_ends_leaves_no_stop_flags_behind():
    board = StopBoard()
    board.arm("a")
    board.stop("b", device_busy=True)  # kept for b's next run
    with board.running("c"):
        board.forget("c")  # a run under way keeps its own flag until it ends
    for session in ("a", "b"):
        board.forget(session)
    assert not board._armed and not board._pending and not board._running


def test_added_pairs_belong_to_their_session_within_a_limit_and_go_with_it():
    from specviz.app.shelf import ADDED_PER_SESSION, PairPreset
    from specviz.errors import InvalidRequest

    shelf = ModelShelf([PairPreset("preset", "t", "d")])
    mine = [shelf.add(f"t{i}", "d", "alice") for i in range(ADDED_PER_SESSION)]
    with pytest.raises(InvalidRequest, match=f"at most {ADDED_PER_SESSION} pairs"):
        shelf.add("one", "more", "alice")
    assert shelf.choices("alice") == ["preset", *mine] and shelf.choices("bob") == ["preset"]
    assert shelf.preset(mine[0], "alice").target == "t0"
    with pytest.raises(InvalidRequest) as refused:
        shelf.preset(mine[0], "bob")  # another visitor's pair: unknown to bob, and not listed to him
    assert str(refused.value) == f"unknown model pair {mine[0]!r}; choose one of: preset"
    shelf.forget("alice")
    assert shelf.choices("alice") == ["preset"]


def test_a_public_space_does_not_let_visitors_name_pairs_unless_its_owner_says_so():
    import app
    from specviz.errors import InvalidRequest

    assert app.added_pairs({}) == "on" and app.added_pairs({"SPECVIZ_ADD_PAIRS": "0"}) != "on"
    assert app.added_pairs({"SPACE_ID": "someone/specviz", "SPECVIZ_ADD_PAIRS": "1"}) == "on"
    off = app.added_pairs({"SPACE_ID": "someone/specviz"})
    shelf = ModelShelf([], added_pairs=off)
    with pytest.raises(InvalidRequest, match="off on this Space; its owner can turn it on"):
        shelf.add("t", "d", "alice")
