"""Concurrency, end to end with tiny real models: the app's sweep (every level, lane and row checked against the prompt
decoded alone), Stop between two batch steps, bad levels refused in one line, lanes that do not batch, the packets
crossing a GPU worker's pipe, the record and its replay, vLLM's configuration and the CLI's `concurrency`."""

import json
import pickle

import pytest
from test_cli import assert_one_line_error, run_cli

from specviz.app.backend import Backend
from specviz.app.shelf import ModelShelf, PairPreset
from specviz.cli.traffic_tables import concurrency_table as table
from specviz.errors import InvalidRequest, SpecvizError
from specviz.events import PLAIN
from specviz.render.concurrency_charts import concurrency_chart
from specviz.render.concurrency_page import (
    concurrency_snapshot_html,
    concurrency_table,
    crossover_words,
    ratio_words,
    svg_concurrency_chart,
    vllm_block,
)
from specviz.serving.batch_table import ranges
from specviz.settings import Settings
from specviz.trace import RunModels
from specviz.traffic import runner
from specviz.traffic.levels_view import ConcurrencyView
from specviz.traffic.results import BatchStep, LevelRun, News
from specviz.traffic.traffic_plan import ROUNDS, check_rounds, level_points
from specviz.traffic.traffic_record import ConcurrencyRecord, RecordError, kind_of, replay
from specviz.traffic.vllm_advice import measured_tables, vllm_advice

PROMPTS = ["w1 w2 w3", "w4 w5 w1 w2", "w3"]


@pytest.fixture(scope="module")
def backend(pair_folders):
    target, draft = pair_folders
    return Backend(ModelShelf([PairPreset("tiny", str(target), str(draft))], "cpu"))


def values(**over):
    return {"pair": "tiny", "dtype": "float32", "prompt": "unused", "max_new_tokens": 12, **over}


@pytest.fixture(scope="module")
def swept(backend):
    views, finished = [], []
    for view in backend.concurrency(values(), PROMPTS, "draft@3,draft@a4,ngram", "1,2,4", rounds=2):
        views.append(view)
        finished.append(view.finished)
    assert finished == [False] * (len(finished) - 1) + [True]  # "done" is shown once, with the record
    return views


def test_a_sweep_runs_every_level_and_lane_and_every_row_writes_what_its_prompt_writes_alone(swept):
    final = swept[-1]
    assert final.finished and not final.stopped
    assert final.lanes == (PLAIN, "draft@3", "draft@a4", "ngram")
    for lane in final.lanes:
        for level in (1, 2, 4):
            runs = final.runs[lane, level]
            assert len(runs) == 2 and all(r.rows == level for r in runs)  # two rounds each
            assert final.identical[lane, level] == [True] * level
            f = final.figures(lane, level)
            assert f.identical and f.throughput > 0 and f.latency > 0
            assert (f.speedup is None) == (lane == PLAIN)
    assert final.runs["draft@3", 4][0].prompts == (0, 1, 2, 0)  # the prompts in turn, again from the first
    gammas = {s.gamma for run in final.runs["draft@3", 2] for s in run.steps if s.drafted}
    assert max(gammas) == 3  # a fixed γ (shorter only where a row nears its budget)
    assert final.figures("draft@3", 2).predicted is not None  # a fixed γ has a theory
    assert final.figures("draft@a4", 2).predicted is None  # adaptive has none
    spread = final.figures("ngram", 4).spread  # two rounds: the speedup's lowest and highest, the median between
    assert spread[0] <= final.figures("ngram", 4).speedup <= spread[1] and final.fewest_rounds() == 2


def test_the_view_grows_run_by_run_and_says_what_runs(backend):
    seen = [(len(v.order), v.message) for v in backend.concurrency(values(), PROMPTS, "ngram", "1,2")]
    counts = [n for n, _ in seen]
    assert counts == sorted(counts) and counts[-1] == 2 * 2 and len(set(counts)) == 5
    assert any("alone" in message for _, message in seen) and seen[-1][1] == "done"


def test_between_two_lanes_the_progress_line_says_what_the_next_level_is_doing(backend, monkeypatch):
    """Before a level's first tokens its prompts are read into the target's cache (and, at the first step, the draft
    model's, for a lane that drafts with one), which on a CPU can take a minute: the line says so as the level starts,
    then how far it got, never the last level's count meanwhile."""
    monkeypatch.setattr(runner, "PROGRESS_EVERY_S", 0.0)
    said = []
    for view in backend.concurrency(values(), PROMPTS, "draft@3,ngram", "1,2"):
        if view.message != (said[-1] if said else None):
            said.append(view.message)
    for level, many in ((1, "1 request at once"), (2, "2 requests at once")):
        prompts = "the prompt" if level == 1 else "the 2 prompts, a forward each,"
        drafted = "the first step, where the draft model reads them too"
        for lane, first in ((PLAIN, "the first step"), ("draft@3", drafted), ("ngram", "the first step")):
            where = f"{lane} · {many} · round 1/1"
            opening = f"{where}: reading {prompts} into the target's cache, then {first}…"
            assert opening in said, said
            after = said[said.index(opening) + 1]
            assert after.startswith(f"{where}: ") and after.endswith(f"/{level * 12} tokens"), (opening, after)


def test_a_line_said_right_after_a_run_landed_is_shown(swept):
    """The screen draws at most every UPDATE_EVERY_S how far a level got, but never holds back a line that says what
    runs next: the next lane's prompts being read come right after a run lands and may stand for a minute."""
    from specviz.app.ui.under_load_screen import UnderLoadHandlers

    class Screen(UnderLoadHandlers):
        def concurrency_outputs(self, view, charts=True):
            return view.message

    run = swept[-1].runs[PLAIN, 1][0]
    news = [
        News("message", "plain · 1 request at once · round 1/1: reading the prompt…"),
        News("progress", "plain · 1 request at once · round 1/1: 6/12 tokens"),
        News("progress", "plain · 1 request at once · round 1/1: 12/12 tokens"),
        News("run", lane=PLAIN, run=run),
        News("message", "draft@3 · 1 request at once · round 1/1: reading the prompt…"),
    ]

    def views():
        view = ConcurrencyView((1,), (PLAIN, "draft@3"))
        for item in news:
            view.hear(item)
            yield view

    shown = list(Screen().stream_concurrency(views()))
    assert shown[0] == news[0].text and shown[-1] == news[-1].text


def test_a_finished_sweep_is_a_record_that_replays_to_the_same_figures(swept, tmp_path):
    final = swept[-1]
    record = final.saved
    path = record.save(tmp_path / "sweep.json")
    back = ConcurrencyRecord.load(path)
    assert back.prompts == PROMPTS and back.levels == (1, 2, 4)
    replayed = list(replay(back, speed=0.0))
    assert [len(v.order) for v in replayed][-1] == len(final.order)
    again = replayed[-1]
    assert again.finished
    assert again.rows() == final.rows()
    assert again.crossover("ngram") == final.crossover("ngram")


def test_a_record_written_under_the_features_earlier_name_still_replays(swept, tmp_path):
    """Sweeps recorded before the feature was named "concurrency" say "format": "specviz-load"."""
    data = swept[-1].saved.to_json()
    assert data["format"] == "specviz-concurrency"
    path = tmp_path / "earlier.json"
    path.write_text(json.dumps({**data, "format": "specviz-load"}))
    back = ConcurrencyRecord.load(path)
    assert kind_of(json.loads(path.read_text())) is ConcurrencyRecord
    assert back.final_view().rows() == swept[-1].rows()
    assert "<svg" in concurrency_snapshot_html(back)


def test_a_record_carries_the_vllm_advice_its_sweep_wrote_and_older_ones_show_none(swept, tmp_path):
    """The advice is written where the sweep ran (it asks the drafters' kinds) and recorded, so a replay or a snapshot
    page shows it with no kind loaded; a record from before it was kept shows no vLLM block rather than failing."""
    record = swept[-1].saved
    advice = {a.drafter: a for a in record.vllm}
    assert set(advice) == {"draft", "ngram"} and advice["draft"].config["method"] == "draft_model"
    back = ConcurrencyRecord.load(record.save(tmp_path / "sweep.json"))
    assert back.vllm == record.vllm and "num_speculative_tokens_per_batch_size" in concurrency_snapshot_html(back)
    older = {k: v for k, v in record.to_json().items() if k != "vllm"}
    assert ConcurrencyRecord.from_json(older).vllm == () and 'class="sv-vllm"' not in concurrency_snapshot_html(
        ConcurrencyRecord.from_json(older)
    )
    damaged = {**record.to_json(), "vllm": [{"drafter": "draft", "config": [1], "note": ""}]}
    with pytest.raises(RecordError, match=r"vllm\[0\]\.config"):
        ConcurrencyRecord.from_json(damaged)


def test_a_damaged_record_is_refused_in_one_line(swept, tmp_path):
    data = json.loads(json.dumps(swept[-1].saved.to_json()))
    data["runs"][0]["tokens"] = data["runs"][0]["tokens"][:-1] + [[1, "x"]]
    with pytest.raises(RecordError, match=r"runs\[0\]\.tokens"):
        ConcurrencyRecord.from_json(data)
    with pytest.raises(RecordError, match="not a recorded sweep"):
        ConcurrencyRecord.from_json({"format": "specviz-trace"})
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(RecordError, match="cannot read"):
        ConcurrencyRecord.load(tmp_path / "bad.json")


def test_stop_ends_a_sweep_between_two_batch_steps(backend, monkeypatch):
    monkeypatch.setattr(runner, "PROGRESS_EVERY_S", 0.0)  # every batch step reports: Stop can land inside a level
    seen = []
    for view in backend.concurrency(values(max_new_tokens=200), PROMPTS, "draft@3", "2,4", stopped=lambda: bool(seen)):
        if "tokens" in view.message:  # a level under way reported its first step
            seen.append(view.message)
    assert seen
    assert view.finished and view.stopped
    assert view.order == []  # the level under way was abandoned, not half counted
    assert view.saved is not None and view.saved.stopped


@pytest.mark.parametrize("levels", ["0", "-1", "1,two", "300", ""])
def test_bad_levels_are_refused_in_one_line_before_any_model_loads(pair_folders, levels):
    target, draft = pair_folders
    fresh = Backend(ModelShelf([PairPreset("tiny", str(target), str(draft))], "cpu"))
    with pytest.raises(InvalidRequest) as caught:
        next(fresh.concurrency(values(), PROMPTS, "draft", levels))
    assert "\n" not in str(caught.value)
    assert fresh.shelf.current() is None


def test_a_level_too_large_for_the_device_is_refused_in_one_line(backend, monkeypatch):
    monkeypatch.setattr("specviz.models.device.free_bytes", lambda device: 1)
    with pytest.raises(SpecvizError) as caught:
        list(backend.concurrency(values(), PROMPTS, "draft", "1,256"))
    assert "256 requests at once" in str(caught.value) and "\n" not in str(caught.value)


def test_lanes_that_do_not_decode_a_batch_say_why_and_the_others_run(backend):
    final = list(backend.concurrency(values(), PROMPTS, "hybrid,medusa,ngram", "1,2"))[-1]
    assert set(final.notes) == {"hybrid", "medusa"}
    assert all(final.notes[lane] and "\n" not in final.notes[lane] for lane in final.notes)
    assert final.identical["ngram", 2] == [True, True]
    assert "cannot decode concurrent requests" in concurrency_table(final)


def test_every_packet_of_a_sweep_crosses_a_worker_pipe(backend):
    list(backend.shelf.load("tiny", "float32"))
    asked = backend._check({**values(), "prompt": PROMPTS[0], "drafter": "draft"}, "")
    lanes = tuple(backend._grid(asked, "draft@2", False)[1])
    packets = list(backend.calls.under_load(asked, lanes, level_points((1, 2)), "levels", 1, tuple(PROMPTS)))
    assert [p.kind for p in packets][0] == "start" and packets[-1].kind == "end"
    for packet in packets:
        assert pickle.loads(pickle.dumps(packet)) == packet


def _run(lane: str, rows: int, tokens_per_s: float, gamma: int = 0) -> LevelRun:
    step = BatchStep(rows, gamma, rows * (1 + gamma), 0.0, 0.1, 1.0, rows * gamma, rows * gamma // 2, rows)
    return LevelRun(lane, rows, (0,) * rows, ((1,) * int(tokens_per_s / rows),) * rows, (1.0,) * rows, (step,), 0, 1)


def test_a_lane_has_no_verdict_before_it_runs_and_no_theory_where_none_was_priced():
    view = ConcurrencyView((1, 2), (PLAIN, "draft@2", "draft"))
    view.fixed = {"draft@2": 2}  # "draft" is adaptive: its γ moves, so no theory prices it
    assert crossover_words(view, "draft@2") == crossover_words(view, "draft") == "not run yet"
    for lane, tps in {PLAIN: (10, 20), "draft@2": (15, 16), "draft": (12, 24)}.items():
        for level, value in zip(view.levels, tps):
            view.add(_run(lane, level, value * level, 2))
    assert crossover_words(view, "draft@2").startswith("below plain from 2 requests: 0.80× there (one round); theory: ")
    assert crossover_words(view, "draft") == "pays at every level run: 1.20× at 2 requests (one round)"  # no theory
    chart = svg_concurrency_chart(view)  # the snapshot page's chart names only the lines it draws
    assert "draft@2: theory" in chart and "draft: theory" not in chart


def _rounds_view(rounds: dict) -> ConcurrencyView:
    """A sweep whose lanes ran `rounds` (lane -> per round, tokens/s per level), in turn as a sweep runs them."""
    view = ConcurrencyView((1, 2, 4), tuple(rounds))
    for turn in range(max(len(r) for r in rounds.values())):
        for lane, per_round in rounds.items():
            for level, value in zip(view.levels, per_round[turn] if turn < len(per_round) else ()):
                view.add(_run(lane, level, value * level, 0 if lane == PLAIN else 2))
    return view


def test_each_speedup_carries_its_spread_over_the_rounds_and_a_verdict_its_rounds():
    """Round i of a lane is set against round i of plain decoding, which ran just before it; the median is shown with
    the lowest and the highest, and a level whose rounds fall on both sides of 1× is named as not settled."""
    plain = [(10, 20, 40), (11, 19, 42), (10, 21, 38)]
    view = _rounds_view({PLAIN: plain, "draft@2": [(15, 21, 30), (16, 18, 33), (14, 22, 31)]})
    f = view.figures("draft@2", 2)
    assert f.rounds == 3 and f.speedup == pytest.approx(21 / 20)
    assert f.spread == pytest.approx((18 / 19, 21 / 20)) and view.fewest_rounds() == 3
    words = crossover_words(view, "draft@2")
    assert words.startswith("below plain from 4 requests: 0.78× there (0.75–0.82 over 3 rounds)")
    assert words.endswith("not settled at 2 requests: its rounds fall on both sides of 1×")
    html = concurrency_table(view)
    assert "<th>speedup (range, 3 rounds)</th>" in html and "<td>1.05× (0.95–1.05)</td>" in html
    assert "verdict needs" not in html  # three rounds: the spread is said, no warning
    assert "0.95-1.05, 3" in table(view) and "verdict needs" not in table(view)
    data = view.to_json()
    assert data["fewest_rounds"] == 3 and data["levels"][1]["lanes"]["draft@2"]["spread"] == pytest.approx(f.spread)


def test_a_sweep_of_one_round_says_a_verdict_needs_three_on_screen_and_in_the_cli():
    view = _rounds_view({PLAIN: [(10, 20, 40)], "draft@2": [(15, 21, 30)]})
    assert view.figures("draft@2", 1).spread == (1.5, 1.5) and view.fewest_rounds() == 1
    assert ratio_words(view, "draft@2", 1) == "1.50× (one round)"
    html, text = concurrency_table(view), table(view)
    assert "<th>speedup (1 round)</th>" in html and "One round: each figure is a single run" in html
    assert "a verdict needs at least 3 rounds (set rounds to 3)." in html
    assert text.startswith("One round: each figure is a single run") and "(--rounds 3)." in text
    assert "(1 round)" in text and "0.75× there (one round)" in crossover_words(view, "draft@2")
    assert "from one round: these lengths may change" in vllm_block(vllm_advice(view), view.fewest_rounds())
    two = _rounds_view({PLAIN: [(10, 20, 40)] * 2, "draft@2": [(15, 21, 30)] * 2})
    assert "2 rounds: each figure is the median of 2 runs" in concurrency_table(two)


def test_the_chart_labels_each_crossover_where_it_is_drawn():
    """A dotted line alone says nothing: its words sit beside it, inside the axis (on a log axis an annotation's x is
    the level's logarithm), the lane's name escaped; the snapshot page's chart draws and labels it too."""
    import math

    lane = "draft@2<b>"
    view = _rounds_view({PLAIN: [(10, 20, 40)], lane: [(15, 21, 30)]})
    fig = concurrency_chart(view, "throughput")
    [note] = fig.layout.annotations
    low, high = fig.layout.xaxis.range
    assert low < note.x < high and note.x == pytest.approx(math.log10(4))
    assert note.text == "<b>draft@2&lt;b&gt;</b>: speculation<br>stops paying ≈ 4 requests"
    assert not concurrency_chart(view, "latency").layout.annotations
    svg = svg_concurrency_chart(view)
    assert 'stroke-dasharray="2 3"' in svg and "draft@2&lt;b&gt;: speculation" in svg and "stops paying ≈ 4" in svg


def test_only_lanes_that_decode_concurrent_requests_are_ticked_and_the_others_say_why():
    from specviz.app.ui.layout import build_app
    from specviz.drafters.registry import build_row_drafting, kinds

    menu = kinds(menu_only=True)
    demo = build_app(object(), ["pair A"], menu, ["bfloat16", "float32"], 64, "same")
    [lanes] = [
        c for c in demo.get_config_file()["components"] if c["props"].get("elem_id") == "sv-concurrency-drafters"
    ]
    ticked = set(lanes["props"]["value"])
    assert ticked and not [k.name for k in menu if k.name in ticked and k.unbatched]
    for k in (k for k in menu if k.unbatched):  # refused in one line, before any model is asked for anything
        with pytest.raises(InvalidRequest, match=f"^{k.name} does not decode a batch yet: ") as caught:
            build_row_drafting(k.name, Settings(), [None, None], target=None)
        assert "\n" not in str(caught.value)


def test_vllm_gets_the_fastest_draft_length_per_concurrency_range():
    view = ConcurrencyView((1, 2, 4, 8), (PLAIN, "draft@2", "draft@4", "ngram@3"))
    view.fixed = {"draft@2": 2, "draft@4": 4, "ngram@3": 3}
    speeds = {PLAIN: (10, 20, 40, 80), "draft@2": (18, 30, 44, 60), "draft@4": (20, 32, 36, 50)}
    speeds["ngram@3"] = (8, 16, 32, 64)
    for lane, tps in speeds.items():
        for level, value in zip(view.levels, tps):
            view.add(_run(lane, level, value * level, view.fixed.get(lane, 0)))
    advice = {a.drafter: a for a in vllm_advice(view, "Qwen/Qwen2.5-Coder-0.5B-Instruct")}
    draft = advice["draft"].config
    assert draft["method"] == "draft_model" and draft["model"] == "Qwen/Qwen2.5-Coder-0.5B-Instruct"
    assert draft["num_speculative_tokens_per_batch_size"] == [[1, 3, 4], [4, 7, 2], [8, 8, 0]]
    assert draft["num_speculative_tokens"] == 4
    assert advice["ngram"].config["num_speculative_tokens_per_batch_size"] == [[1, 8, 0]]
    assert json.loads(advice["draft"].flag.split("'")[1]) == draft
    assert ranges({1: 3, 2: 3, 4: 0}) == [[1, 3, 3], [4, 4, 0]]


def test_a_lane_vllm_lacks_is_named_with_the_reason():
    view = ConcurrencyView((1,), (PLAIN, "history@3"))
    view.fixed = {"history@3": 3}
    view.add(_run(PLAIN, 1, 10))
    view.add(_run("history@3", 1, 20, 3))
    [advice] = vllm_advice(view)
    assert advice.config is None and "suffix" in advice.note


def test_vllm_is_handed_an_offline_draft_by_its_hub_id():
    """The concurrency sweep's vLLM line names the draft as the race's production block does: an offline preset by
    its Hub id."""
    view = ConcurrencyView((1,), (PLAIN, "draft@2"))
    view.fixed = {"draft@2": 2}
    view.add(_run(PLAIN, 1, 10))
    view.add(_run("draft@2", 1, 20, 2))
    [advice] = vllm_advice(view, "qwen2.5-coder-0.5b-instruct")
    assert advice.config["model"] == "Qwen/Qwen2.5-Coder-0.5B-Instruct"


def test_the_snapshot_page_escapes_the_prompts_and_carries_the_charts(swept):
    record = swept[-1].saved
    record.prompts = ["<script>alert(1)</script> & more"]
    page = concurrency_snapshot_html(record)
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in page
    assert page.count("<svg") == 2 and "<script" not in page
    assert "num_speculative_tokens_per_batch_size" in page


def test_the_command_line_sweep_writes_json_a_record_and_vllms_config(capsys, pair_folders, tmp_path):
    target, draft = pair_folders
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS))
    code, out, err = run_cli(
        capsys,
        *("concurrency", "--target", str(target), "--draft", str(draft), "--dtype", "float32", "--device", "cpu"),
        *("--drafters", "draft@2,ngram", "--levels", "1,3", "--prompts", str(prompts), "--max-new-tokens", "8"),
        *("--no-chat", "--json", "--trace", str(tmp_path / "sweep.json")),
    )
    assert code == 0, err
    data = json.loads(out)
    level3 = data["levels"][1]
    assert level3["level"] == 3 and set(level3["lanes"]) == {PLAIN, "draft@2", "ngram"}
    rows = level3["lanes"]["draft@2"]["rows"]
    assert [r["prompt"] for r in rows] == PROMPTS and all(r["identical"] for r in rows)
    assert data["vllm"]["draft"]["speculative_config"]["method"] == "draft_model"
    assert "--speculative-config" in err and "crossover" in err
    assert "a verdict needs at least 3 rounds (--rounds 3)" in err and data["fewest_rounds"] == 1  # one round
    record = ConcurrencyRecord.load(tmp_path / "sweep.json")
    assert record.made_with.startswith("python -m specviz concurrency")
    assert RunModels.from_json(record.models.__dict__) == record.models


@pytest.mark.parametrize(
    ("levels", "needle"), [("0", "from 1 to 256"), ("1,x", "whole number"), ("999", "from 1 to 256")]
)
def test_the_command_line_refuses_bad_levels_in_one_line(capsys, pair_folders, levels, needle):
    code, _, err = run_cli(capsys, "concurrency", "--target", str(pair_folders[0]), "--levels", levels)
    assert_one_line_error(code, err, needle)


@pytest.mark.parametrize("rounds", [0, ROUNDS[-1] + 1, 9])
def test_the_command_line_and_the_app_refuse_rounds_outside_one_bound_in_the_same_line(capsys, pair_folders, rounds):
    target, draft = pair_folders
    fresh = Backend(ModelShelf([PairPreset("tiny", str(target), str(draft))], "cpu"))
    with pytest.raises(InvalidRequest) as caught:
        next(fresh.concurrency(values(), PROMPTS, "draft", "1,2", rounds=rounds))
    assert fresh.shelf.current() is None
    code, _, err = run_cli(capsys, "concurrency", "--target", str(target), "--rounds", str(rounds))
    assert_one_line_error(code, err, f"{ROUNDS[0]}..{ROUNDS[-1]}")
    assert err.strip() == f"error: {caught.value}"


def test_rounds_read_alike_as_a_number_a_sliders_float_or_text():
    assert check_rounds(3) == check_rounds(3.0) == check_rounds(" 3 ") == 3
    for bad in (True, 2.5, float("nan"), "x", None, ROUNDS[-1] + 1, "9" * 400):
        with pytest.raises(InvalidRequest) as caught:
            check_rounds(bad)
        assert "\n" not in str(caught.value) and len(str(caught.value)) < 120


def test_ten_sweeps_in_one_server_leave_nothing_behind(backend):
    """The server keeps no sweep: after the first, ten more leave as many views, runs and tensors alive as it did."""
    import gc

    import torch

    def alive() -> tuple[int, int, int]:
        gc.collect()
        objects = gc.get_objects()
        return (
            sum(isinstance(o, ConcurrencyView) for o in objects),
            sum(isinstance(o, LevelRun) for o in objects),
            sum(isinstance(o, torch.Tensor) for o in objects),
        )

    def one_sweep() -> None:
        for view in backend.concurrency(values(max_new_tokens=6), PROMPTS, "draft@2,ngram", "1,3"):
            assert view.message
        assert view.finished and view.saved.runs

    one_sweep()
    first = alive()
    for _ in range(10):
        one_sweep()
    assert alive() == first


def test_a_visitors_sweep_gives_their_later_races_vllms_measured_table(backend):
    """A visitor's concurrency sweep measures a draft length per batch-size range for the draft model and n-gram;
    the same visitor's race on the same pair hands vLLM that table, another visitor's race does not."""
    sweep = list(backend.concurrency(values(), PROMPTS, "draft@2,draft@3,ngram", "1,2", session="sweeper"))[-1]
    tables = measured_tables(sweep)
    assert set(tables) == {"draft", "ngram"} and all(levels[0][0] == 1 for levels in tables.values())

    def vllm(session):
        race = list(backend.race(values(drafter="draft", gamma=3, prompt="w1 w2"), session=session))[-1]
        [h] = race.production
        text = next(s.text for s in h.settings if s.engine == "vLLM")
        return json.loads(text.split("'")[1])

    mine, theirs = vllm("sweeper"), vllm("another visitor")
    assert mine["num_speculative_tokens_per_batch_size"] == [list(r) for r in tables["draft"]]
    assert mine["num_speculative_tokens"] == max(1, max(g for *_, g in tables["draft"]))
    assert "num_speculative_tokens_per_batch_size" not in theirs and theirs["num_speculative_tokens"] == 3
