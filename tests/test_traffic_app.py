"""Traffic in the app, with the tiny pair: the server's flow (every lane at every rate, every greedy request equal to
its prompt decoded alone, the simulator checked at each rate, vLLM's lines, the record), its packets crossing a GPU
worker's pipe, what it asks ZeroGPU for, bad input refused in one line before any model loads, Stop, and a record's
replay ending on the same table."""

import json
import pickle

import httpx
import pytest

from specviz.app.backend import Backend
from specviz.app.device_calls import LONGEST_CALL_S, under_load_seconds
from specviz.app.shelf import ModelShelf, PairPreset
from specviz.errors import InvalidRequest
from specviz.events import PLAIN
from specviz.render.traffic_page import (
    traffic_charts,
    traffic_production,
    traffic_snapshot_html,
    traffic_table,
    traffic_verdict,
)
from specviz.traffic.runner import prompt_of
from specviz.traffic.traffic_plan import rate_points
from specviz.traffic.traffic_record import TrafficRecord, replay

PROMPTS = ["w1 w2 w3", "w4 w5 w1 w2", "w3 <b>&"]


@pytest.fixture(scope="module")
def backend(pair_folders):
    target, draft = pair_folders
    return Backend(ModelShelf([PairPreset("tiny", str(target), str(draft))], "cpu"))


def call_traffic(url: str, **given) -> str:
    """The /traffic endpoint as any HTTP client calls it: every parameter at its default but those `given`, its
    stream read to the end; the last answer's parts joined as text."""
    parameters = httpx.get(f"{url}gradio_api/info", timeout=30).json()["named_endpoints"]["/traffic"]["parameters"]
    names = [p["parameter_name"] for p in parameters]
    data = [given.get(name, p.get("parameter_default")) for name, p in zip(names, parameters)]
    posted = httpx.post(f"{url}gradio_api/call/traffic", json={"data": data}, timeout=60).json()
    lines = httpx.get(f"{url}gradio_api/call/traffic/{posted['event_id']}", timeout=300).text.splitlines()
    done = [i for i, line in enumerate(lines) if line == "event: complete"]
    assert done, lines[-4:]
    return " ".join(str(part) for part in json.loads(lines[done[-1] + 1].removeprefix("data: ")))


def values(**over):
    return {"pair": "tiny", "dtype": "float32", "prompt": "unused", "max_new_tokens": 10, **over}


@pytest.fixture(scope="module")
def served(backend):
    """Every view's count of runs landed as it came (the view is one object, updated), then the final view, then
    whether each view as it came was finished."""
    counts, finished = [], []
    for view in backend.traffic(values(), PROMPTS, "draft@2,ngram", "20,40", 5, (5.0, 0.5), 3, rounds=2):
        counts.append(len(view.order))
        finished.append(view.finished)
    return counts, view, finished


def test_the_app_serves_every_lane_at_every_rate_and_every_request_writes_what_its_prompt_writes_alone(served):
    counts, final, finished = served
    assert final.finished and final.lanes == (PLAIN, "draft@2", "ngram") and final.rates == (20.0, 40.0)
    for lane in final.lanes:
        for rate in final.rates:
            assert len(final.runs[lane, rate]) == 2  # both rounds
            assert final.identical(lane, rate) is True and len(final.same[lane, rate]) == 2 * 5
            run = final.runs[lane, rate][0]
            assert [t.prompt for t in run.timings] == [prompt_of(r, PROMPTS) for r in range(5)]
    assert {key for key in final.simulated} == {(lane, rate) for lane in final.lanes for rate in final.rates}
    assert {a.drafter for a in final.advice} <= {"draft", "ngram"}  # vLLM's lines: one per drafter, at most
    assert sorted(set(counts)) == list(range(1 + len(final.lanes) * 2 * 2))  # a view as each run lands
    # finished once, at the last view: a screen that says "done" shows the simulator's figures and vLLM's lines
    assert finished == [False] * (len(finished) - 1) + [True]


def test_its_record_reads_back_to_the_same_figures_with_no_model(served, tmp_path):
    final = served[1]
    path = final.saved.save(tmp_path / "traffic.json")
    again = TrafficRecord.load(path).final_view()
    assert traffic_table(again) == traffic_table(final) and traffic_verdict(again) == traffic_verdict(final)
    assert [a.flag for a in again.advice] == [a.flag for a in final.advice]


def test_the_screen_shows_three_charts_and_escapes_the_prompts_text(served):
    final = served[1]
    assert traffic_charts(final).count("<svg") == 3
    said = traffic_production(final)
    for lane in final.lanes[1:]:  # each drafter's own line says one or the other, as its runs measured
        line = next(li for li in said.split("<li>") if li.startswith(f"{lane}: "))
        assert ("turn speculation off" in line) != ("paid at every rate run" in line), line
    html = traffic_snapshot_html(final.saved)
    assert "w3 &lt;b&gt;&amp;" in html and "<b>&" not in html


def test_a_run_with_no_vllm_lines_writes_no_vllm_heading(served):
    import copy

    final = copy.copy(served[1])
    final.advice = []
    said = traffic_production(final)
    assert "for vLLM" not in said and "without a per-batch-size table" not in said
    assert said.startswith('<div class="sv-vllm"><p>Into production:</p><ul><li>')
    assert "for vLLM:</p><ul><li>" in traffic_production(served[1]) or not served[1].advice


def test_nothing_is_said_before_a_run(backend):
    first = next(iter(backend.traffic(values(), PROMPTS, "draft@2", "20", requests=2)))
    assert "<li>" not in traffic_verdict(first) and "<svg" not in traffic_charts(first)


def test_a_replay_lands_each_run_after_its_own_time_and_ends_on_the_same_table(served):
    final, slept = served[1], []
    views = list(replay(final.saved, 4.0, sleep=slept.append))
    assert len(slept) == len(final.order)
    assert slept[0] == pytest.approx(max(t.last_token for t in final.order[0][0].timings) / 4)
    assert views[-1].finished and traffic_table(views[-1]) == traffic_table(final)
    stopped = list(replay(final.saved, 0.0, stopped=lambda: True))
    assert stopped[-1].finished and not stopped[-1].order and "stopped" in stopped[-1].message


def test_every_packet_of_a_traffic_run_crosses_a_worker_pipe(backend):
    list(backend.shelf.load("tiny", "float32"))
    asked = backend._check({**values(), "prompt": PROMPTS[0], "drafter": "draft"}, "")
    lanes = tuple(backend._grid(asked, "draft@2", False)[1])
    points = rate_points({20.0: (0.0, 0.05, 0.1)}, 2)
    packets = list(backend.calls.under_load(asked, lanes, points, "rates", 1, tuple(PROMPTS)))
    assert packets[0].kind == "start" and packets[-1].kind == "end"
    assert [p.news.kind for p in packets if p.kind == "news"].count("run") == 2
    for packet in packets:
        assert pickle.loads(pickle.dumps(packet)) == packet


def test_a_traffic_run_asks_zero_gpu_for_its_arrivals_span_and_tokens_within_the_limit(backend):
    asked = backend._check({**values(), "prompt": PROMPTS[0], "drafter": "draft"}, "")
    short = under_load_seconds(asked, ("a",), rate_points({1.0: (0.0, 1.0)}, 2), "rates", 1)
    longer = under_load_seconds(asked, ("a",), rate_points({1.0: (0.0, 30.0)}, 2), "rates", 1)
    endless = under_load_seconds(asked, ("a",), rate_points({1.0: (0.0, 9e9)}, 2), "rates")
    assert short < longer <= LONGEST_CALL_S and endless == LONGEST_CALL_S


@pytest.mark.parametrize(
    "asked, said",
    [
        (dict(rates="0"), "request rate"),
        (dict(rates="-1, 2"), "request rate"),
        (dict(rates="fast"), "request rate"),
        (dict(rates=""), "no request rates"),
        (dict(slo=(0, 1)), "TTFT"),
        (dict(slo=(1, "x")), "TPOT"),
        (dict(requests=0), "number of requests"),
        (dict(requests=2.5), "number of requests"),
        (dict(max_rows=0), "at once"),
        (dict(rates="0.001", requests=16), "minutes of arrivals for each lane; here at most 10 minutes:"),
        (dict(rounds=0), "rounds"),
    ],
)
def test_bad_traffic_is_refused_in_one_line_before_any_model_loads(pair_folders, asked, said):
    target, draft = pair_folders
    fresh = Backend(ModelShelf([PairPreset("tiny", str(target), str(draft))], "cpu"))
    given = dict(rates="1", requests=4, slo=(5.0, 0.5), max_rows=2) | asked
    with pytest.raises(InvalidRequest) as refused:
        next(fresh.traffic(values(), PROMPTS, "draft@2", **given))
    assert said in str(refused.value) and "\n" not in str(refused.value)
    assert fresh.shelf.current() is None


def test_stop_ends_traffic_with_the_runs_so_far(backend):
    seen = []
    for view in backend.traffic(
        values(max_new_tokens=40), PROMPTS, "draft@2", "5,10", requests=6, max_rows=2, stopped=lambda: bool(seen)
    ):
        if view.order:
            seen.append(len(view.order))
    assert view.finished and "stopped" in view.message and len(view.order) < 4
    assert view.saved is not None and len(view.saved.runs) == len(view.order)


def test_the_verdict_gives_each_lanes_capacity_and_where_it_stops_paying_measured_and_simulated(served):
    """One line a product manager reads first, then per lane: measured, and the simulator's figure around the rates
    run (the replay simulates the same)."""
    final = served[1]
    assert set(final.projection) == set(final.lanes)
    html = traffic_verdict(final).replace("&#x27;", "'")  # words such as "the machine's speed moved", as shown
    headline = final.headline()
    assert headline.startswith("Capacity within the SLO: plain ") and f"{headline}</p>" in html
    for lane in final.lanes:
        assert f"{lane} at no rate run" in headline or f"{lane} up to " in headline
        words = final.capacity_words(lane)
        assert "(simulated: " in words and words.startswith("meets the SLO ")
        assert words in html
    for lane in final.lanes[1:]:
        assert "(simulated: " in final.paying_words(lane) and final.paying_words(lane) in html
