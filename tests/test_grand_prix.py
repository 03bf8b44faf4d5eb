"""The Grand Prix with the tiny pair: every lane equals plain decoding, the turn order keeps the race's rule, lanes at
several settings, bad lanes, lanes that cannot run or fail, Stop, sampling, the replay on the lanes' own clocks, the
queue, and `python -m specviz race`."""

import json

import pytest
from test_backend import request  # the tiny pair's request, as the backend's own tests make it

from specviz.app.backend import Backend
from specviz.app.shelf import ModelShelf, PairPreset
from specviz.errors import InvalidRequest, SpecvizError
from specviz.events import PLAIN, StepEvent, generated_ids
from specviz.trace import Trace
from specviz.views.grand_prix import KIND, replay_grand_prix, turns_keep_the_rule
from specviz.views.race import Lane, interleave


@pytest.fixture(scope="module")
def backend(pair_folders, pair_heads, pair_eagle, pair_dflash):
    """The tiny pair bringing Medusa heads, an EAGLE head and a DFlash drafter: every drafter can race."""
    target, draft = pair_folders
    heads = (("medusa", str(pair_heads)), ("eagle", str(pair_eagle)), ("dflash", str(pair_dflash)))
    return Backend(ModelShelf([PairPreset("tiny", str(target), str(draft), heads)], "cpu"))


@pytest.fixture(scope="module")
def bare(pair_folders):
    """The tiny pair with no heads: Medusa, EAGLE and DFlash cannot race with it."""
    target, draft = pair_folders
    return Backend(ModelShelf([PairPreset("tiny", str(target), str(draft))], "cpu"))


@pytest.fixture(scope="module")
def every(backend):
    """A greedy Grand Prix of every drafter the app offers: (at each view it yielded: how many turns had run and
    whether it was final; the final view)."""
    seen, final = [], None
    for final in backend.grand_prix(request()):
        seen.append((len(final.turns), final.finished))
    return seen, final


def plain_alone(backend, prompt="w1 w2 w3", max_new_tokens=40) -> list[int]:
    from specviz.engine import generate
    from specviz.settings import Settings

    pair = backend.shelf.current()
    ids = pair.target.tokenizer.encode(prompt)
    return generated_ids(generate(pair.target, ids, Settings(max_new_tokens=max_new_tokens)))


# -- a greedy Grand Prix of every drafter --


def test_every_drafter_races_and_writes_plain_decodings_tokens(backend, every):
    from specviz.drafters.registry import kinds

    _, final = every
    assert final.finished and not final.stopped and final.message == "done"
    assert [lane.name for lane in final.lanes] == [PLAIN] + [k.name for k in kinds(menu_only=True)]
    assert all(lane.runs for lane in final.lanes), [lane.note for lane in final.lanes]
    plain = final.plain.tokens
    assert len(plain) == 40 and plain == plain_alone(backend)
    assert all(e.next_kind == "plain" for e in final.plain.events)
    for lane in final.drafted:
        assert lane.done and lane.tokens == plain, lane.name
        assert final.identical(lane) is True and lane.divergence is None, lane.name
        assert any(e.proposed for e in lane.events), lane.name  # it drafted
    assert final.identical(final.plain) is True
    summary = final.summary()
    assert summary["kind"] == KIND and summary["finished"] and not summary["stopped"]
    assert all(lane["identical"] is True and lane["tokens"] == plain for lane in summary["lanes"])


def test_the_turn_order_keeps_the_rule_and_counts_every_step(every):
    views, final = every
    trace = final.trace
    assert trace is not None and trace.kind == KIND
    assert [s.name for s in trace.sides] == [lane.name for lane in final.lanes]
    turns = trace.extra["turns"]
    assert turns == final.turns
    assert turns_keep_the_rule([s.events for s in trace.sides], turns) == []
    assert len(turns) == sum(len(s.events) for s in trace.sides) == sum(len(lane.events) for lane in final.lanes)
    for i, side in enumerate(trace.sides):  # each lane's turns are its own steps
        assert turns.count(i) == len(side.events), side.name
    steps = len(turns)
    running = [n for n, finished in views if n and not finished]
    assert running == list(range(1, steps + 1))  # a view after every step of any lane
    assert views[-1] == (steps, True) and [f for _, f in views].count(True) == 1  # then the final one


def test_every_lane_has_a_settled_place_ordered_by_its_own_clock(every):
    _, final = every
    places = [final.place(lane) for lane in final.lanes]
    assert sorted(places) == list(range(1, len(final.lanes) + 1)), places
    by_clock = sorted(final.lanes, key=lambda lane: lane.clock_s)
    assert [final.place(lane) for lane in by_clock] == list(range(1, len(final.lanes) + 1))
    for lane in final.lanes:
        own = sum(e.prefill_s + e.step_s for e in lane.events)
        assert lane.clock_s == pytest.approx(own, abs=1e-9), lane.name
    assert [row.place for row in final.rows()] == places


def test_a_place_is_settled_only_once_no_running_lane_can_beat_it():
    """While the race runs, a finished lane's place waits until every lane still running is past its clock."""
    from specviz.views.grand_prix import GrandPrixView, RaceLane

    view = GrandPrixView(lanes=[RaceLane(PLAIN), RaceLane("a"), RaceLane("b")], greedy=True, max_new_tokens=2)
    view.take(1, step(0, 0.5, finish="length", token=7))  # "a" finishes at 0.5 s
    assert view.place(view.lane("a")) is None  # plain (at 0 s) and "b" (at 0 s) could still beat it
    view.take(0, step(0, 0.3, token=7))
    view.take(2, step(0, 0.6, token=7))
    assert view.place(view.lane("a")) is None  # plain, at 0.3 s, still could
    view.take(0, step(1, 0.3, finish="length", token=8))  # plain finishes at 0.6 s
    assert view.place(view.lane("a")) == 1 and view.place(view.plain) == 2
    assert view.place(view.lane("b")) is None  # still running
    assert view.agrees_so_far(view.lane("a")) is True and view.agrees_so_far(view.plain) is None
    view.take(2, step(1, 0.1, finish="length", token=9))
    assert view.agrees_so_far(view.lane("b")) is False
    assert view.identical(view.lane("b")) is None  # not before the race is over
    view.finished = True
    assert view.place(view.lane("b")) == 3
    assert view.summary()["turns"] == [1, 0, 2, 0, 2]


# -- the rule, checked on a recorded turn order --


def step(index: int, seconds: float, finish: str | None = None, token: int = 5) -> StepEvent:
    """A plain step of `seconds` by hand."""
    return StepEvent(index, (), 0, token, "plain", (), None, 0.0, 0.0, seconds, finish=finish)


def lane_events(*seconds: float) -> list[StepEvent]:
    return [step(i, s, finish="length" if i == len(seconds) - 1 else None) for i, s in enumerate(seconds)]


def interleaved(lanes: list[list[StepEvent]]) -> list[int]:
    """The turn order race.interleave gives these lanes."""
    names = [str(i) for i in range(len(lanes))]
    states = {n: Lane(n) for n in names}
    return [int(n) for n in interleave({n: iter(events) for n, events in zip(names, lanes)}, states)]


def test_a_turn_order_the_race_made_keeps_the_rule():
    lanes = [lane_events(1.0, 1.0), lane_events(0.5, 0.5, 0.5)]
    turns = interleaved(lanes)
    assert turns == [0, 1, 1, 0, 1]  # a tie goes to the earlier lane
    assert turns_keep_the_rule(lanes, turns) == []
    finished_early = [lane_events(1.0, 1.0, 1.0), lane_events(0.5)]  # a finished lane behind holds nobody
    assert interleaved(finished_early) == [0, 1, 0, 0]
    assert turns_keep_the_rule(finished_early, [0, 1, 0, 0]) == []


def test_a_tampered_turn_order_is_caught():
    lanes = [lane_events(1.0, 1.0), lane_events(0.5, 0.5, 0.5)]
    tampered = [0, 1, 0, 1, 1]  # turns 2 and 3 swapped: lane 0 (at 1 s) runs while lane 1 is at 0.5 s
    breaches = turns_keep_the_rule(lanes, tampered)
    assert breaches == ["turn 2: lane 0 ran at 1.0000 s while lane 1 was at 0.5000 s"]
    three = [lane_events(0.2, 0.2), lane_events(0.3), lane_events(0.1, 0.1, 0.1)]
    fair = interleaved(three)
    assert fair == [0, 1, 2, 2, 0, 2] and turns_keep_the_rule(three, fair) == []
    order = [0, 2, 2, 0, 2, 1]  # lane 1 made to wait for the end while its clock stood at 0
    assert turns_keep_the_rule(three, order) == [
        "turn 2: lane 2 ran at 0.1000 s while lane 1 was at 0.0000 s",
        "turn 3: lane 0 ran at 0.2000 s while lane 1 was at 0.0000 s",
        "turn 4: lane 2 ran at 0.2000 s while lane 1 was at 0.0000 s",
    ]
    assert len(turns_keep_the_rule([lane_events(1.0, 1.0), lane_events(1.0)], [0, 0, 1])) == 1


# -- lanes of one drafter at several settings --


def test_one_drafter_races_at_several_settings(backend):
    final = list(backend.grand_prix(request(), lanes="draft@1,draft@3,draft@a4"))[-1]
    assert final.finished and not final.stopped
    assert [lane.name for lane in final.lanes] == [PLAIN, "draft@1", "draft@3", "draft@a4"]
    assert [(lane.gamma, lane.adaptive) for lane in final.drafted] == [(1, False), (3, False), (4, True)]
    assert all(lane.drafter == "draft" for lane in final.drafted)
    assert "adaptive γ ≤ 4" in final.lane("draft@a4").words and "γ = 3" in final.lane("draft@3").words
    for lane in final.drafted:
        assert lane.tokens == final.plain.tokens and final.identical(lane) is True, lane.name
        assert all(e.gamma <= lane.gamma for e in lane.events), (lane.name, [e.gamma for e in lane.events])
    assert any(e.gamma == 3 for e in final.lane("draft@3").events)
    assert all(e.gamma == 1 for e in final.lane("draft@1").events)
    assert final.trace.extra["lanes"][1:] == [
        {"name": n, "drafter": "draft", "words": final.lane(n).words, "note": "", "gamma": g, "adaptive": a}
        for n, g, a in (("draft@1", 1, False), ("draft@3", 3, False), ("draft@a4", 4, True))
    ]
    summary = final.summary()["lanes"]
    assert [(s["gamma"], s["adaptive"]) for s in summary] == [(0, False), (1, False), (3, False), (4, True)]
    assert turns_keep_the_rule([s.events for s in final.trace.sides], final.trace.extra["turns"]) == []


def test_the_sidebars_settings_give_every_lane_the_requests_gamma(backend):
    final = list(backend.grand_prix(request(gamma=2, max_new_tokens=16), lanes="draft,ngram", best=False))[-1]
    assert [(lane.gamma, lane.adaptive) for lane in final.drafted] == [(2, False), (2, False)]
    assert all(lane.tokens == final.plain.tokens for lane in final.drafted)
    best = list(backend.grand_prix(request(gamma=2, max_new_tokens=16), lanes="draft,ngram"))[-1]
    assert [(lane.gamma, lane.adaptive) for lane in best.drafted] == [(8, True), (10, True)]  # their measured best


@pytest.mark.parametrize(
    "lanes, words",
    [
        ("nope", "unknown drafter 'nope'"),
        ("draft,nope", "unknown drafter 'nope'"),
        ("draft@x", "after @ comes a draft length"),
        ("draft@²", "after @ comes a draft length"),
        ("draft@-2", "after @ comes a draft length"),
        ("draft,draft", "lane 'draft' is named twice"),
        ("draft@4, draft@04", "lane 'draft@4' is named twice"),
        ("draft@0", "gamma (draft length) must be an integer in 1..32"),
        ("draft@a33", "gamma (draft length) must be an integer in 1..32"),
        (",".join(f"draft@{g}" for g in range(1, 14)), "13 lanes: a Grand Prix races at most 12"),
    ],
)
def test_bad_lanes_are_refused_in_one_line_before_anything_loads(pair_folders, lanes, words):
    target, draft = pair_folders
    fresh = Backend(ModelShelf([PairPreset("tiny", str(target), str(draft))], "cpu"))
    with pytest.raises(InvalidRequest) as refused:
        next(fresh.grand_prix(request(), lanes=lanes))
    assert words in str(refused.value) and "\n" not in str(refused.value)
    assert fresh.shelf.current() is None


def test_twelve_lanes_race(bare):
    lanes = [f"draft@{g}" for g in range(1, 11)] + ["ngram@2", "history@a3"]
    final = list(bare.grand_prix(request(max_new_tokens=6), lanes=lanes))[-1]
    assert len(final.lanes) == 13 and final.finished and not final.stopped
    assert all(lane.tokens == final.plain.tokens and final.identical(lane) for lane in final.drafted)


# -- lanes that cannot run, and a lane that fails --


def test_a_lane_that_cannot_run_says_why_and_never_holds_the_race(bare):
    views = bare.grand_prix(request(), lanes="draft,medusa,eagle,dflash,ngram")
    first = next(views)
    off = ["medusa", "eagle", "dflash"]
    for name in off:
        lane = first.lane(name)
        assert lane.note.startswith("not available: ") and lane.done and not lane.runs, (name, lane.note)
    assert "no Medusa heads for" in first.lane("medusa").note
    seen = [first]
    for view in views:
        assert {lane.name for lane in view.running()} <= {PLAIN, "draft", "ngram"}
        seen.append(view)
    final = seen[-1]
    assert final.finished and not final.stopped and final.message == "done"
    for name in off:
        lane = final.lane(name)
        assert lane.events == [] and final.place(lane) is None and final.identical(lane) is None
    index = {lane.name: i for i, lane in enumerate(final.lanes)}
    assert not {index[n] for n in off} & set(final.turns)
    for name in ("draft", "ngram"):
        assert final.lane(name).tokens == final.plain.tokens and final.identical(final.lane(name)) is True
    assert sorted(p for p in (final.place(lane) for lane in final.lanes) if p) == [1, 2, 3]
    rows = {row.name: row for row in final.rows()}
    assert rows["medusa"].note.startswith("not available: ") and rows["medusa"].tokens_per_s is None
    lanes = {lane["name"]: lane for lane in final.summary()["lanes"]}
    assert lanes["eagle"]["tokens"] == [] and lanes["eagle"]["note"].startswith("not available: ")


def test_a_lane_that_fails_mid_race_leaves_and_the_others_finish(bare, monkeypatch):
    import specviz.workload.lanes as lanes_module

    real = lanes_module.generate_named

    def decode(*args, **kwargs):
        steps = real(*args, **kwargs)
        if args[3:4] != ("ngram",):  # (target, prompt_ids, settings, drafter, ...): plain gives no drafter
            return steps

        def two_then_fail():
            yield next(steps)
            yield next(steps)
            raise SpecvizError("the lookup table burnt down")

        return two_then_fail()

    monkeypatch.setattr(lanes_module, "generate_named", decode)
    final = list(bare.grand_prix(request(), lanes="draft,ngram,history"))[-1]
    assert final.finished and not final.stopped and final.message == "done"
    failed = final.lane("ngram")
    assert failed.note == "failed: the lookup table burnt down" and failed.done and not failed.runs
    assert len(failed.events) == 2 and final.place(failed) is None and final.identical(failed) is None
    assert failed.tokens == final.plain.tokens[: len(failed.tokens)]
    assert len(final.plain.tokens) == 40
    for name in ("draft", "history"):
        lane = final.lane(name)
        assert lane.done and lane.tokens == final.plain.tokens and final.identical(lane) is True, name
    trace = final.trace
    assert turns_keep_the_rule([s.events for s in trace.sides], trace.extra["turns"]) == []
    assert trace.extra["lanes"][2]["note"] == "failed: the lookup table burnt down"
    assert sorted(p for p in (final.place(lane) for lane in final.lanes) if p) == [1, 2, 3]


# -- Stop --


def test_stop_keeps_what_every_lane_wrote_and_the_next_grand_prix_runs(bare):
    counts: list[int] = []

    def stopped():
        return sum(counts) >= 20

    views = []
    for view in bare.grand_prix(request(max_new_tokens=2000), lanes="draft,ngram,history", stopped=stopped):
        if not view.finished:
            counts[:] = [len(lane.events) for lane in view.lanes]
        views.append(view)
    final = views[-1]
    assert final.finished and final.stopped and final.message.startswith("stopped")
    assert [len(lane.events) for lane in final.lanes] == counts and sum(counts) == 20  # nothing more was added
    assert all(n > 0 for n in counts), counts  # every lane took turns before the stop
    assert len(final.turns) == 20 and final.running()
    assert all(len(lane.tokens) < 2000 for lane in final.lanes)
    plain = final.plain.tokens
    for lane in final.drafted:  # compared as far as both got
        shorter = min(len(plain), len(lane.tokens))
        assert lane.tokens[:shorter] == plain[:shorter] and final.identical(lane) is True, lane.name
    assert final.trace.stopped and turns_keep_the_rule([s.events for s in final.trace.sides], final.turns) == []
    again = list(bare.grand_prix(request(max_new_tokens=12), lanes="draft,ngram,history"))[-1]
    assert again.finished and not again.stopped and again.message == "done"
    assert all(lane.done and len(lane.tokens) == 12 and lane.tokens == again.plain.tokens for lane in again.lanes)


# -- sampling --


def test_a_sampled_grand_prix_finishes_every_lane_and_claims_no_identity(backend):
    views = list(backend.grand_prix(request(temperature=1.0, seed=7, max_new_tokens=30)))
    final = views[-1]
    assert final.finished and not final.stopped and not final.greedy
    runnable = [lane for lane in final.lanes if lane.runs]
    assert len(runnable) == len(final.lanes)  # this pair brings every drafter's models
    for lane in runnable:
        assert lane.done and lane.events[-1].finish in ("eos", "length"), lane.name
        assert len(lane.tokens) == 30 or lane.events[-1].finish == "eos", lane.name
        assert final.identical(lane) is None and lane.divergence is None, lane.name
    summary = json.loads(json.dumps(final.summary()))
    assert not summary["greedy"] and len(summary["lanes"]) == len(final.lanes)
    for lane in summary["lanes"]:
        assert lane["identical"] is None and lane["done"] and lane["note"] == "", lane["name"]
        assert lane["metrics"]["new_tokens"] == len(lane["tokens"]) > 0, lane["name"]
        assert lane["metrics"]["tokens_per_s"] > 0, lane["name"]
    again = list(backend.grand_prix(request(temperature=1.0, seed=7, max_new_tokens=30), lanes="ngram"))[-1]
    assert again.plain.tokens == final.plain.tokens  # the seed decides plain decoding's draws


# -- the replay on the lanes' own clocks --


def test_the_replay_runs_on_the_lanes_own_clocks(every, tmp_path):
    _, final = every
    trace = Trace.load(final.trace.save(tmp_path / "gp.json"))
    slept: list[float] = []
    speed = 4.0
    recorded = {lane.name: lane for lane in final.lanes}
    ends = {
        lane.name: [sum(e.prefill_s + e.step_s for e in lane.events[: n + 1]) for n in range(len(lane.events))]
        for lane in final.lanes
    }
    views = 0
    for view in replay_grand_prix(trace, speed=speed, sleep=slept.append):
        views += 1
        if view.finished:
            break
        shown_until = max(ends[lane.name][len(lane.events) - 1] for lane in view.lanes if lane.events)
        waiting = [ends[lane.name][len(lane.events)] for lane in view.lanes if len(lane.events) < len(ends[lane.name])]
        assert not waiting or shown_until <= min(waiting) + 1e-12, (shown_until, min(waiting))
        for lane in view.lanes:  # each lane shows its recorded steps in order
            assert lane.events == recorded[lane.name].events[: len(lane.events)], lane.name
    longest = max(lane.clock_s for lane in final.lanes)
    assert sum(slept) * speed == pytest.approx(longest, abs=1e-6)
    assert all(s >= 0 for s in slept)
    assert view.finished and view.recorded and not view.stopped
    assert views == sum(len(lane.events) for lane in final.lanes) + 1
    for lane in view.lanes:
        old = recorded[lane.name]
        assert lane.tokens == old.tokens and lane.done, lane.name
        settings = lambda x: (x.drafter, x.words, x.gamma, x.adaptive)  # noqa: E731
        assert settings(lane) == settings(old), lane.name  # adaptive too
        assert lane.clock_s == pytest.approx(old.clock_s, abs=1e-9)
        assert view.identical(lane) is True, lane.name
    assert [view.place(lane) for lane in view.lanes] == [final.place(lane) for lane in final.lanes]
    assert view.wall_s == pytest.approx(longest / speed, abs=1e-6)


def test_a_stopped_replay_ends_at_once(every):
    _, final = every
    seen = []
    for view in replay_grand_prix(final.trace, speed=1000.0, stopped=lambda: len(seen) >= 5, sleep=lambda s: None):
        seen.append(sum(len(lane.events) for lane in view.lanes))
    assert seen[-1] == 5 and view.finished and view.stopped


def test_a_saved_grand_prix_loads_as_one(every, tmp_path):
    from specviz.render.snapshot import snapshot_html
    from specviz.views.grand_prix import from_trace

    _, final = every
    path = tmp_path / "gp.json"
    final.trace.save(path)
    loaded = Trace.load(path)
    assert loaded.kind == KIND and loaded.extra["turns"] == final.turns
    again = from_trace(loaded)
    assert [lane.tokens for lane in again.lanes] == [lane.tokens for lane in final.lanes]
    settings = [(lane.gamma, lane.adaptive) for lane in final.lanes]
    assert [(lane.gamma, lane.adaptive) for lane in again.lanes] == settings
    assert all(again.identical(lane) is True for lane in again.lanes)
    page = snapshot_html(loaded)
    assert "Every lane of the Grand Prix" in page and all(lane.name in page for lane in final.lanes)


# -- the queue --


def test_the_queue_tells_a_grand_prixs_place_and_the_runs_ahead(pair_folders):
    target, draft = pair_folders
    backend = Backend(ModelShelf([PairPreset("tiny", str(target), str(draft))], "cpu"))
    line = backend.line
    assert line.busy("a") == "" and not line.waiting("a")
    with line.on_device("z", 2, "race"):
        line.wait("b", 3, "Grand Prix of 3 lanes")
        line.wait("a", 9, "Grand Prix of 9 lanes")
        assert line.waiting("a") and line.waiting("b")
        said = line.busy("a")
        assert said.startswith("queued: 2nd in line, 5 runs ahead of yours"), said
        assert "another visitor's race has the device" in said
        assert line.busy("b").startswith("queued: 1st in line, 2 runs ahead of yours")
        assert "3rd in line, 14 runs ahead" in line.busy("c")  # a run started now waits behind both
    said = line.busy("a")  # the race ended; "b" has not started yet
    assert said.startswith("queued: 2nd in line, 3 runs ahead of yours") and "being handed on" in said, said
    with line.on_device("b", 3, "Grand Prix of 3 lanes"):
        assert not line.waiting("b") and line.waiting("a")
        said = line.busy("a")
        assert said.startswith("queued: 1st in line, 3 runs ahead of yours"), said
        assert "another visitor's Grand Prix of 3 lanes has the device" in said
    with line.on_device("a", 9, "Grand Prix of 9 lanes"):
        assert not line.waiting("a") and line.busy("a") == ""  # its own run holds nothing up for it
        assert "9 runs ahead" in line.busy("d") and "Grand Prix of 9 lanes" in line.busy("d")
    assert line.busy("a") == "" and line.busy() == ""
    line.wait("a", 4, "Grand Prix of 4 lanes")
    line.wait("a", 2, "race")  # a new click replaces the session's place
    assert line.busy("e").startswith("queued: 2nd in line, 2 runs ahead of yours"), line.busy("e")


def test_a_run_that_fails_before_it_reaches_the_device_gives_up_its_place(bare):
    """A click takes its place in line; its run refused before it reaches the device (a bad prompt, say) must not
    leave it there, or every visitor after it would wait behind a run that never comes."""
    from types import SimpleNamespace

    from specviz.app.ui.handlers import Handlers

    handlers = Handlers(bare, SimpleNamespace(race=None))
    bare.line.wait("f", 9, "Grand Prix of 9 lanes")
    with pytest.raises(InvalidRequest), handlers.on_device("f"):
        list(bare.grand_prix(request(prompt="   "), session="f"))
    assert not bare.line.waiting("f") and bare.line.busy("g") == ""


def test_a_grand_prix_takes_its_place_off_the_line_when_it_starts(bare):
    bare.line.wait("q", 3, "Grand Prix of 3 lanes")
    views = bare.grand_prix(request(max_new_tokens=4), lanes="draft,ngram", session="q")
    next(views)
    assert not bare.line.waiting("q")
    held = bare.line._on[-1]
    assert (held.session, held.runs, held.what) == ("q", 3, "Grand Prix of 3 lanes")
    list(views)
    assert bare.line._on == [] and bare.line.busy("q") == ""


# -- python -m specviz race --


def race_cli(folder, *extra):
    return ["race", "--target", str(folder), "--dtype", "float32", "--device", "cpu", "--no-chat", *extra]


def test_the_race_command_runs_a_grand_prix_and_records_it(capsys, model_folder, tmp_path):
    from specviz.cli import main

    trace_path = tmp_path / "gp.json"
    code = main(
        race_cli(
            model_folder,
            "--draft",
            str(model_folder),
            "--drafters",
            "draft,ngram,history",
            "--prompt",
            "w1 w2 w3",
            "--max-new-tokens",
            "12",
            "--json",
            "--trace",
            str(trace_path),
        )
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    assert result["kind"] == KIND and result["finished"] and not result["stopped"] and result["greedy"]
    lanes = result["lanes"]
    assert [lane["name"] for lane in lanes] == [PLAIN, "draft", "ngram", "history"]
    plain = lanes[0]["tokens"]
    assert len(plain) == 12
    assert all(lane["identical"] is True and lane["tokens"] == plain and lane["done"] for lane in lanes)
    assert sorted(lane["place"] for lane in lanes) == [1, 2, 3, 4]
    assert all(lane["text"] == lanes[0]["text"] for lane in lanes) and result["prompt_tokens"] == 3
    assert "done in" in err and all(lane["name"] in err for lane in lanes)
    trace = Trace.load(trace_path)
    assert trace.kind == KIND and [s.name for s in trace.sides] == [PLAIN, "draft", "ngram", "history"]
    assert [generated_ids(s.events) for s in trace.sides] == [lane["tokens"] for lane in lanes]
    assert turns_keep_the_rule([s.events for s in trace.sides], trace.extra["turns"]) == []
    assert trace.extra["turns"] == result["turns"] and len(result["turns"]) == sum(len(s.events) for s in trace.sides)
    page = tmp_path / "gp.html"
    assert main(["snapshot", str(trace_path), "--out", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert "Every lane of the Grand Prix" in html and "history" in html


def test_the_race_command_races_one_drafter_at_several_gammas(capsys, model_folder):
    from specviz.cli import main

    code = main(
        race_cli(
            model_folder, "--drafters", "ngram@1,ngram@a6", "--prompt", "w1 w2 w1 w2", "--max-new-tokens", "8", "--json"
        )
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    lanes = json.loads(out)["lanes"]
    assert [(lane["name"], lane["gamma"], lane["adaptive"]) for lane in lanes] == [
        (PLAIN, 0, False),
        ("ngram@1", 1, False),
        ("ngram@a6", 6, True),
    ]
    assert all(lane["tokens"] == lanes[0]["tokens"] and lane["identical"] for lane in lanes)


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--drafters", "nope"], "unknown drafter 'nope'"),
        (["--drafters", "draft@x"], "after @ comes a draft length"),
        (["--drafters", "draft@²"], "after @ comes a draft length"),
        (["--drafters", "ngram,ngram"], "named twice"),
        (["--drafters", "draft"], "--drafters draft: it needs a draft model (--draft)"),
        (["--drafters", "ngram", "--trace", "/no/such/folder/gp.json"], "--trace /no/such/folder/gp.json"),
        (["--drafters", "ngram", "--adaptive"], "--adaptive goes with --gamma"),
        (["--drafters", "ngram", "--gamma", "0"], "gamma"),
        (["--drafters", "ngram", "--max-new-tokens", "0"], "max new tokens"),
    ],
)
def test_bad_race_input_is_one_error_line_before_any_model_loads(capsys, tmp_path, extra, words):
    from specviz.cli import main

    empty = tmp_path / "no-model"  # loading it would fail with another message
    empty.mkdir()
    code = main(race_cli(empty, "--prompt", "w1 w2", *extra))
    _, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert words in lines[0] and "Traceback" not in err, lines[0]


def test_the_shipped_grand_prix_kept_the_rule_and_every_lane_wrote_plains_tokens():
    """The recorded Grand Prix of the offline pair (assets/traces/grand-prix-code.json): greedy, in exact mode, every
    lane that raced wrote plain decoding's tokens, the turn order keeps the rule, and it replays to the same tokens."""
    from specviz.paths import ASSETS
    from specviz.trace import EXACT_ON

    trace = Trace.load(ASSETS / "traces" / "grand-prix-code.json")
    assert trace.kind == KIND and trace.greedy and trace.models.exact == EXACT_ON
    raced = [s for s in trace.drafted if s.events]
    assert len(raced) >= 7 and all(s.tokens == trace.plain.tokens for s in raced)
    assert all(s.divergence is None for s in raced) and len(trace.plain.tokens) == 64
    assert turns_keep_the_rule([s.events for s in trace.sides], trace.extra["turns"]) == []
    *_, final = replay_grand_prix(trace, speed=1.0, sleep=lambda _: None)
    assert [lane.tokens for lane in final.lanes] == [s.tokens for s in trace.sides]


def test_a_drafter_raced_at_several_settings_shows_each_lanes_name_escaped():
    """The comparison tab's text of a drafter raced twice heads each lane with its name, as text."""
    from types import SimpleNamespace

    from specviz.app.ui.grand_prix_screen import GrandPrixHandlers
    from specviz.settings import Settings
    from specviz.views.grand_prix import RaceLane, starting_grid

    lanes = [RaceLane("draft@2<b>", drafter="draft", note="failed: x"), RaceLane("draft@4", drafter="draft")]
    view = starting_grid(lanes, Settings(max_new_tokens=4), finished=True)
    box = object()
    screen = SimpleNamespace(compare_table=object(), compare_chart=object(), compare_texts={"draft": box})
    shown = GrandPrixHandlers.comparison(SimpleNamespace(screen=screen), view)[box]
    assert "draft@2&lt;b&gt;" in shown and "<b>" not in shown and "draft@4" in shown
