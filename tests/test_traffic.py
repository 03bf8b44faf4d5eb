"""Traffic: requests that arrive at a rate (a seeded Poisson process or a recorded trace), served by continuous
batching, each one's TTFT and TPOT measured and summed up per lane and rate against an SLO; the command line's
checks before any model loads, and a whole run on the tiny pair where every greedy request equals its prompt alone."""

import json
import math
import statistics
import time
from dataclasses import replace

import pytest
from test_cli import assert_one_line_error, run_cli

from specviz.analysis.theory import expected_tokens_per_step
from specviz.errors import InvalidRequest
from specviz.events import PLAIN
from specviz.settings import Settings
from specviz.trace import RunModels
from specviz.traffic.latency import RateFigures, RequestTiming, capacity, median_figures, percentile, stops_paying
from specviz.traffic.rates_view import TrafficView
from specviz.traffic.results import BatchStep, News, Prefill, TrafficRun
from specviz.traffic.simulator import Calibration, adaptive_limit, simulate
from specviz.traffic.traffic_plan import Slo, check_rates, check_slo, poisson_arrivals, read_arrivals
from specviz.traffic.traffic_record import RecordError, TrafficRecord
from specviz.traffic.vllm_advice import MIN_STEPS, best_gammas, vllm_advice

PROMPTS = ["w1 w2 w3", "w4 w5 w1 w2", "w3"]


def test_poisson_arrivals_are_seeded_and_their_gaps_average_one_over_the_rate():
    times = poisson_arrivals(2.0, 4000, seed=7)
    assert times == poisson_arrivals(2.0, 4000, seed=7) and times != poisson_arrivals(2.0, 4000, seed=8)
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert times[0] == 0.0 and all(g >= 0 for g in gaps)
    assert statistics.fmean(gaps) == pytest.approx(0.5, rel=0.05)
    assert statistics.stdev(gaps) == pytest.approx(0.5, rel=0.08)  # exponential: the spread equals the mean


def test_rates_are_read_sorted_and_distinct():
    assert check_rates("0.4, 0.1,0.2,0.1") == (0.1, 0.2, 0.4) and check_rates([1, 3]) == (1.0, 3.0)


@pytest.mark.parametrize("rates", ["0", "-1", "abc", "nan", "inf", "", "0.1,,x", "5000"])
def test_a_rate_that_is_not_a_positive_number_is_refused_in_one_line(rates):
    with pytest.raises(InvalidRequest) as refused:
        check_rates(rates)
    assert "\n" not in str(refused.value)
    if rates:  # the field's own unit and range, in words
        assert "a request rate is a number of requests per second above 0 and at most 1000" in str(refused.value)


def test_an_objective_refused_names_its_unit():
    with pytest.raises(InvalidRequest, match="the TPOT objective is a number of seconds above 0 and at most 600"):
        check_slo("1", "-2")


@pytest.mark.parametrize("levels", ["-1", "0", "x", "300", "1.5"])
def test_a_level_refused_names_the_range_in_words(levels):
    from specviz.traffic.traffic_plan import check_levels

    with pytest.raises(InvalidRequest, match="a concurrency level is a whole number of requests from 1 to 256, got"):
        check_levels(levels)


@pytest.mark.parametrize("done, words", [(0, "0 runs done"), (1, "1 run done"), (2, "2 runs done")])
def test_the_progress_line_counts_runs_in_agreement(done, words):
    from specviz.render.concurrency_page import progress_line

    line = progress_line("running <ngram>", done, "sv-busy")
    assert line.endswith(f"· {words}</div>") and "&lt;ngram&gt;" in line


def test_an_slo_of_zero_or_not_a_number_is_refused():
    assert check_slo("2", 0.25) == Slo(2.0, 0.25)
    for ttft, tpot in (("0", "1"), ("1", "-2"), ("x", "1"), ("1", "nan")):
        with pytest.raises(InvalidRequest):
            check_slo(ttft, tpot)


def test_a_trace_of_arrival_times_is_read_as_lines_or_json_and_starts_at_zero(tmp_path):
    lines = tmp_path / "times.txt"
    lines.write_text("# seconds\n12.5\n\n10\n11.25\n")
    assert read_arrivals(lines) == (0.0, 1.25, 2.5)
    listed = tmp_path / "times.json"
    listed.write_text("[3, 1, 2.5]")
    assert read_arrivals(listed) == (0.0, 1.5, 2.0)


@pytest.mark.parametrize(
    "content, said",
    [("", "no arrival times"), ("1\nsoon\n", "line 2"), ("[1, -1]", "item 2"), ('{"a": 1}', "JSON list"),
     ("[1, true]", "item 2"), ("1\nnan\n", "line 2"), (b"\xff\xfe1", "UTF-8")],
)  # fmt: skip
def test_a_bad_arrivals_file_is_refused_in_one_line_naming_where(tmp_path, content, said):
    path = tmp_path / "times.txt"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(InvalidRequest, match=said) as refused:
        read_arrivals(path)
    assert "\n" not in str(refused.value)


def timing(arrival, first, last, tokens, admitted=None):
    return RequestTiming(0, arrival, arrival if admitted is None else admitted, first, last, tokens)


def test_each_requests_latencies_follow_from_its_times():
    t = timing(1.0, 3.0, 7.0, 5, admitted=2.0)
    assert (t.queue_s, t.ttft_s, t.tpot_s, t.e2e_s) == (1.0, 2.0, 1.0, 6.0)
    assert timing(0.0, 1.0, 1.0, 1).tpot_s is None  # one token: no time per output token


def test_percentiles_interpolate_between_ranks():
    assert percentile([4, 1, 3, 2], 50) == 2.5 and percentile([1, 2, 3, 4, 5], 90) == pytest.approx(4.6)
    assert percentile([7], 99) == 7 and percentile([], 50) is None


def test_goodput_counts_the_requests_that_met_both_objectives_over_the_runs_duration():
    slo = Slo(ttft_s=2.0, tpot_s=0.5)
    timings = [timing(0, 1, 5, 9), timing(1, 4, 6, 5), timing(2, 3, 9, 5), timing(3, 4, 4, 1)]
    # ttft 1, 3, 1, 1; tpot 0.5, 0.5, 1.5, none: the first and the last met both
    f = RateFigures.of(0.5, timings, slo)
    assert f.good == 2 and f.duration_s == 9 and f.goodput == pytest.approx(2 / 9)
    assert f.tokens_per_s == pytest.approx(20 / 9) and not f.meets_slo
    assert f.ttft[0] == 1.0 and f.tpot[0] == 0.5


def figures(rate, tpot50, goodput, meets=True, good=None):
    good = good if good is not None else 10 if meets else 5
    return RateFigures(rate, 10, 10.0, 1.0, (1, 1, 1), (tpot50, tpot50, tpot50), good, goodput)


def test_capacity_is_the_highest_rate_before_the_first_that_missed_the_slo():
    runs = [figures(0.1, 0.2, 0.1), figures(0.2, 0.3, 0.2), figures(0.4, 0.9, 0.2, meets=False)]
    assert capacity(runs) == 0.2 and capacity(runs[2:]) is None and capacity(runs[:2]) == 0.2


def test_a_drafter_stops_paying_where_its_requests_are_no_faster_than_plains():
    plain = [figures(0.1, 0.30, 0.1), figures(0.2, 0.32, 0.2), figures(0.4, 0.40, 0.3)]
    lane = [figures(0.1, 0.20, 0.1), figures(0.2, 0.33, 0.2), figures(0.4, 0.30, 0.3)]
    assert stops_paying(lane, plain) == 0.2
    assert stops_paying([figures(0.1, 0.2, 0.05, good=9)], plain[:1]) == 0.1  # faster, but fewer met the SLO
    assert stops_paying([figures(0.1, 0.2, 0.09)], plain[:1]) is None  # as many good, a little later done
    assert stops_paying(plain[:1], [figures(0.1, 0.5, 0.1)]) is None


def test_a_verdict_with_no_rate_within_the_slo_still_says_capacity_and_where_speculation_stops_paying():
    view = TrafficView((0.5, 1.0), (PLAIN, "draft@2", "ngram"), Slo(1.0, 0.1))
    for lane, tpots in {PLAIN: (0.3, 0.4), "draft@2": (0.2, 0.5), "ngram": (0.15, 0.2)}.items():
        for rate, tpot in zip(view.rates, tpots):
            view.runs[lane, rate] = [TrafficRun(lane, rate, 0, 4, (timing(0, 0.5, 0.5 + 9 * tpot, 10),), (), (), ())]
    assert view.headline() == (
        "Capacity within the SLO: plain at no rate run, draft@2 at no rate run, ngram at no rate run; "
        "speculation stops paying: draft@2 at 1 req/s."
    )
    assert view.capacity_words(PLAIN) == "meets the SLO at none of 0.5–1 req/s"
    view.projection = {lane: [figures(0.25, 0.05, 1.0), figures(2.0, 0.3, 0.0, meets=False)] for lane in view.lanes}
    assert view.capacity_words(PLAIN) == "meets the SLO at none of 0.5–1 req/s (simulated: up to 0.25 req/s)"
    assert view.paying_words("ngram").endswith("(simulated: stops paying at 0.25 req/s)")


def test_the_median_round_takes_each_figures_own_median():
    rounds = [figures(0.1, t, g) for t, g in ((0.3, 0.1), (0.1, 0.3), (0.2, 0.2))]
    mid = median_figures(rounds)
    assert mid.tpot[0] == 0.2 and mid.goodput == 0.2 and median_figures(rounds[:1]) == rounds[0]


@pytest.mark.parametrize(
    "flags, needle",
    [(("--rates", "0"), "above 0"), (("--rates", "-0.5"), "above 0"), (("--rates", "fast"), "fast"),
     (("--slo-ttft", "0"), "TTFT"), (("--slo-tpot", "x"), "TPOT"), (("--requests", "0"), "--requests"),
     (("--max-rows", "0"), "--max-rows"), (("--arrivals", "/no/such/file"), "arrivals")],
)  # fmt: skip
def test_the_command_line_refuses_bad_traffic_before_any_model_loads(capsys, flags, needle):
    code, _, err = run_cli(capsys, "traffic", "--target", "/no/such/model", *flags)
    assert_one_line_error(code, err, needle)


def test_the_command_line_serves_traffic_and_every_greedy_request_equals_its_prompt_alone(
    capsys, pair_folders, tmp_path
):
    target, draft = pair_folders
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS))
    code, out, err = run_cli(
        capsys,
        *("traffic", "--target", str(target), "--draft", str(draft), "--dtype", "float32", "--device", "cpu"),
        *("--drafters", "draft@2,ngram@a3", "--rates", "20,200", "--requests", "7", "--max-rows", "3"),
        *("--prompts", str(prompts), "--max-new-tokens", "8", "--no-chat", "--json"),
        *("--trace", str(tmp_path / "traffic.json"), "--simulate", "20"),
    )
    assert code == 0, err
    data = json.loads(out)
    record = TrafficRecord.load(tmp_path / "traffic.json")
    served = sum(max(t.last_token for t in run.timings) for run, _ in record.runs)
    assert record.wall_s > served  # the whole run's seconds, not only its projection's
    replayed = record.final_view().to_json()  # no model: the same figures back
    # a record keeps no projection: its replay simulates again around its rates, as many requests as each rate ran
    assert data["projection"][PLAIN]["rates"][0]["requests"] == 20
    assert replayed["projection"][PLAIN]["rates"][0]["requests"] == 7
    kept = {k: v for k, v in data.items() if k not in ("prompts", "vllm", "projection")}
    assert {k: v for k, v in json.loads(json.dumps(replayed)).items() if k != "projection"} == kept
    assert data["vllm"]["draft"]["speculative_config"]["method"] == "draft_model"
    assert [r["rate"] for r in data["rates"]] == [20.0, 200.0]
    for at in data["rates"]:
        assert set(at["lanes"]) == {PLAIN, "draft@2", "ngram@a3"}
        for lane in at["lanes"].values():
            (run,) = lane["runs"]
            assert lane["identical"] is True and len(run["requests"]) == 7
            assert all(r["token_ids"] and r["ttft_s"] >= r["queue_s"] >= 0 for r in run["requests"])
            assert math.isfinite(lane["tpot_s"]["p99"]) and lane["good"] <= 7
            assert max(s["rows"] for s in run["steps"]) <= 3
    assert "capacity under the SLO" in err and "TTFT" in err and "Capacity within the SLO: plain " in err


# -- the simulator --


def calibration(step=1.0, per_row=0.0, gained=2.0, gamma=3, length=9, prefill=(0.5, 0.0)):
    """A lane whose every step costs `step` (+ `per_row` a row) and gives each row `gained` tokens, γ always `gamma`."""
    verify = {t: step + per_row * t / (1 + gamma) for t in (1, 4, 8, 16, 32, 64)}
    return Calibration(
        verify_s=verify, draft_s={}, rest_s={1: 0.0}, prefill=prefill, tokens_at={gamma: gained},
        gamma_at={1: (gamma, int(gamma > 0))}, lengths={0: length}, prompt_tokens={0: 5},
    )  # fmt: skip


def test_one_request_alone_takes_its_prefill_then_a_step_per_share_of_its_tokens():
    (t,) = simulate(calibration(), (0.0,), [0], max_rows=4)
    # prefill 0.5 s, then steps of 1 s giving 2 tokens: 9 tokens in 5 steps, the first after 1.5 s
    assert (t.admitted, t.first_token, t.last_token, t.tokens) == (0.0, 1.5, 5.5, 9)
    assert t.ttft_s == 1.5 and t.tpot_s == pytest.approx(0.5)


def test_with_one_row_requests_wait_in_arrival_order_and_queueing_adds_to_their_ttft():
    timings = simulate(calibration(), (0.0, 0.1, 0.2), [0, 0, 0], max_rows=1)
    assert [t.admitted for t in timings] == [0.0, 5.5, 11.0]  # each joins when the one before it is done
    assert [round(t.queue_s, 6) for t in timings] == [0.0, 5.4, 10.8]
    assert [t.ttft_s for t in timings] == pytest.approx([1.5, 6.9, 12.3])


def test_requests_that_arrive_while_others_decode_join_them_at_a_step_boundary():
    timings = simulate(calibration(), (0.0, 2.0), [0, 0], max_rows=4)
    # the second arrives during the first's step ending at 2.5, joins there, reads its prompt until 3.0
    assert timings[1].admitted == 2.5 and timings[1].first_token == 4.0
    assert timings[0].last_token == 5.5 + 0.5  # the prefill between its steps held it up


def test_an_idle_simulator_jumps_to_the_next_arrival():
    late = simulate(calibration(), (0.0, 100.0), [0, 0], max_rows=4)[1]
    assert late.admitted == 100.0 and late.ttft_s == 1.5


def test_calibration_reads_the_costs_and_yields_a_run_measured():
    steps = [BatchStep(2, 3, 8, 0.3, 1.0, 1.4, 6, 4, 6), BatchStep(1, 0, 1, 0.0, 0.5, 0.6, 0, 0, 1)]
    timings = (RequestTiming(0, 0.0, 0.0, 1.0, 3.0, 7), RequestTiming(1, 0.5, 0.5, 1.0, 3.0, 4))
    run = TrafficRun("draft@3", 0.2, 0, 4, timings, ((1,) * 7, (1,) * 4), tuple(steps),
                     (Prefill(10, 1, 0.3), Prefill(30, 2, 0.7)))  # fmt: skip
    c = Calibration.of([run], {0: 10, 1: 10})
    assert c.verify_s == {8: 1.0, 1: 0.5} and c.tokens_at == {3: 3.0, 0: 1.0} and c.gamma_at == {2: (3, 2), 1: (0, 0)}
    assert c.prefill == pytest.approx((0.0, (0.03 + 0.7 / 30) / 2)) and c.lengths == {0: 7, 1: 4}  # the median ratio
    assert c.step_s(2, 3, 2) == pytest.approx(0.3 + 1.0 + 0.1) and c.step_s(1, 0, 0) == pytest.approx(0.5 + 0.1)


def test_steps_where_some_rows_draft_teach_what_a_drafting_row_gains_and_the_simulator_drafts_for_as_many():
    """Adaptive γ may draft for some rows only (the packed forward charges each row its own positions): a step of 4
    rows where 1 drafted γ 3 and wrote 4 tokens, the others one each, teaches 4 tokens per drafting row, draft(1, 3),
    V(4 + 3) and the schedule (γ 3, 1 row) at 4 rows; simulated, of two rows decoding together one gains the drafting
    row's tokens a step, the other one."""
    step = BatchStep(4, 3, 7, 0.2, 1.0, 1.3, 3, 3, 7, 1, drafting=1)
    timings = (RequestTiming(0, 0.0, 0.0, 1.0, 3.0, 7),)
    run = TrafficRun("draft@a3", 0.2, 0, 4, timings, ((1,) * 7,), (step,) * 3, (Prefill(10, 1, 0.3),))
    c = Calibration.of([run], {0: 10})
    assert c.tokens_at == {3: 4.0} and c.draft_s == {(1, 3): 0.2} and c.verify_s == {7: 1.0}
    assert c.gamma_at == {4: (3, 1)} and c.gamma(2) == (3, 1) and c.step_s(4, 3, 1) == pytest.approx(1.3)
    two = replace(calibration(gained=4.0, length=8), gamma_at={2: (3, 1)})
    first, second = simulate(two, (0.0, 0.0), [0, 0], max_rows=2)
    assert first.last_token < second.last_token  # 8 tokens in 2 steps against one token a step, then 4 a step
    assert second.last_token - first.last_token == pytest.approx(2 * two.step_s(1, 3, 1))


def test_what_the_draft_reads_of_a_rows_text_is_measured_apart_and_charged_when_the_row_first_drafts():
    """Steps where the draft caught up on rows' texts (read_tokens) teach r, the draft's seconds past a steady step's
    per token read, and leave draft(B, γ) to the steady steps; the simulator charges r for a row's whole text at the
    first step that drafts for it, and nothing more while it drafts on, nor on plain steps."""
    steady, reading = BatchStep(2, 3, 8, 0.3, 1.0, 1.4, 6, 4, 6, 2), BatchStep(2, 3, 8, 0.8, 1.0, 1.9, 6, 4, 6, 50)
    timings = (RequestTiming(0, 0.0, 0.0, 1.0, 3.0, 7),)
    run = TrafficRun("draft@3", 0.2, 0, 4, timings, ((1,) * 7,), (steady, steady, reading), (Prefill(10, 1, 0.3),))
    c = Calibration.of([run], {0: 10})
    assert c.draft_s == {(2, 3): 0.3} and c.read_s == pytest.approx(0.01)
    (alone,) = simulate(calibration(), (0.0,), [0], max_rows=4)
    (read,) = simulate(replace(calibration(), read_s=0.01), (0.0,), [0], max_rows=4)
    assert read.first_token == pytest.approx(alone.first_token + 0.05)  # its 5 prompt tokens, once
    assert read.last_token == pytest.approx(alone.last_token + 0.05)
    (plain,) = simulate(replace(calibration(gamma=0), read_s=0.01), (0.0,), [0], max_rows=4)
    assert plain.last_token == simulate(calibration(gamma=0), (0.0,), [0], max_rows=4)[0].last_token


def adaptive(verify: dict, alpha=0.8, length=12) -> Calibration:
    """An adaptive lane up to γ 4 whose drafts hold with probability `alpha`, a drafted position 0.05 s."""
    made = {g: expected_tokens_per_step(alpha, g) for g in range(1, 5)}
    draft = {(1, g): 0.05 * g for g in range(1, 5)}
    return replace(calibration(length=length), verify_s=verify, tokens_at=made, draft_s=draft, adapts=4)


def test_the_simulated_adaptive_lane_chooses_each_step_as_adaptive_gamma_prices_it():
    """An adaptive lane is simulated by adaptive γ's own pricing with the calibrated costs, not by the schedule its
    runs happened to take: where the target's forward costs the same for 1 to 64 tokens (memory-bound) one request
    drafts and ends in far fewer steps than its 12 tokens; where it costs a second a token (compute-bound) it decodes
    plainly, a step a token, though the runs it was calibrated on drafted γ 4 at every batch size."""
    flat, steep = {t: 1.0 for t in (1, 4, 8, 16, 32, 64)}, {t: 1.0 * t for t in (1, 4, 8, 16, 32, 64)}
    (drafting,) = simulate(adaptive(flat), (0.0,), [0], max_rows=4)
    (plain,) = simulate(adaptive(steep), (0.0,), [0], max_rows=4)
    assert drafting.last_token < 0.5 + 6 * 1.0 and plain.last_token == pytest.approx(0.5 + 12 * 1.0)
    (scheduled,) = simulate(replace(adaptive(steep), adapts=0), (0.0,), [0], max_rows=4)  # the lane's γ 4, always
    assert scheduled.last_token > plain.last_token


def test_the_simulator_reads_an_adaptive_lanes_alpha_and_limit_from_its_runs_and_its_name():
    """α is the one whose E(α, γ) is what drafting rows measured; a lane named NAME@aG is adaptive up to G."""
    assert adaptive({1: 1.0}, alpha=0.8).alpha() == pytest.approx(0.8, abs=1e-6)
    assert adaptive({1: 1.0}, alpha=0.35).alpha() == pytest.approx(0.35, abs=1e-6)
    lanes = ("draft@a4", "ngram@A8", "draft@4", "plain", "draft@table", "draft@a²")
    assert [adaptive_limit(lane) for lane in lanes] == [4, 8, 0, 0, 0, 0]


def test_ten_thousand_simulated_requests_take_seconds_not_minutes():
    c = calibration(per_row=0.05)
    began = time.perf_counter()
    timings = simulate(c, poisson_arrivals(0.5, 10_000, seed=1), [0] * 10_000, max_rows=8)
    assert len(timings) == 10_000 and time.perf_counter() - began < 30  # a generous bound; about 1 s here
    assert all(t.first_token > t.admitted >= t.arrival for t in timings)


@pytest.mark.parametrize(
    "damage, said",
    [(lambda d: d.pop("runs"), "no 'runs'"), (lambda d: d.update(version=9), "version"),
     (lambda d: d["runs"][0].update(rate=-1), "rate"),
     (lambda d: d["runs"][0]["requests"][0].update(prompt=99), "prompt"),
     (lambda d: d.update(format="other"), "not a recorded traffic run")],
)  # fmt: skip
def test_a_damaged_traffic_record_is_refused_in_one_line(tmp_path, damage, said):
    timings = (RequestTiming(0, 0.0, 0.0, 1.0, 2.0, 3),)
    run = TrafficRun("plain", 0.5, 0, 2, timings, ((5, 6, 7),), (BatchStep(1, 0, 1, 0.0, 0.5, 0.6, 0, 0, 1),),
                     (Prefill(4, 1, 0.2),))  # fmt: skip
    record = TrafficRecord((0.5,), (PLAIN,), Slo(2.0, 0.5), 1, 2, [4], prompts=["a"], settings={},
                           models=RunModels("t", "", "t", "float32", "", "cpu", ""), runs=[(run, (True,))])  # fmt: skip
    data = json.loads(json.dumps(record.to_json()))
    assert TrafficRecord.from_json(data).final_view().figures(PLAIN, 0.5) == run.figures(Slo(2.0, 0.5))
    damage(data)
    with pytest.raises(RecordError, match=said) as refused:
        TrafficRecord.from_json(data)
    assert "\n" not in str(refused.value)


def test_a_recorded_run_is_judged_again_against_another_slo_with_no_model(capsys, tmp_path):
    """A serving engineer tries the objective a product needs on runs already made: `traffic --replay FILE
    --slo-tpot S` prints the same runs counted against S, each goodput with its lowest and highest over the rounds
    (a verdict inside plain's own spread is noise); without --replay a target is still asked for, in one line."""
    steps = (BatchStep(1, 0, 1, 0.0, 0.5, 0.6, 0, 0, 1),)
    runs = []
    for turn, tpot in enumerate((0.4, 0.3)):  # two rounds: one request slower than 0.35 s a token, one faster
        timings = (RequestTiming(0, 0.0, 0.0, 1.0, 1.0 + 2 * tpot, 3),)
        runs.append((TrafficRun(PLAIN, 0.5, turn, 2, timings, ((5, 6, 7),), steps, ()), (True,)))
    models = RunModels("t", "", "t", "float32", "", "cpu", "")
    record = TrafficRecord(
        (0.5,), (PLAIN,), Slo(10.0, 0.35), 2, 2, [4], prompts=["a"], settings={}, models=models, runs=runs
    )
    record.save(tmp_path / "run.json")
    code, out, err = run_cli(capsys, "traffic", "--replay", str(tmp_path / "run.json"), "--json")
    assert code == 0, err
    as_run = json.loads(out)["rates"][0]["lanes"][PLAIN]
    assert as_run["goodput_spread"] == [0.0, pytest.approx(1 / 1.6)] and "0.000-0.625" in err
    code, out, err = run_cli(capsys, "traffic", "--replay", str(tmp_path / "run.json"), "--slo-tpot", "0.5", "--json")
    judged = json.loads(out)
    assert code == 0 and judged["slo"] == {"ttft_s": 10.0, "tpot_s": 0.5}
    assert judged["rates"][0]["lanes"][PLAIN]["goodput_spread"] == [pytest.approx(1 / 1.8), pytest.approx(1 / 1.6)]
    assert "TPOT <= 0.5 s" in err
    assert_one_line_error(*run_cli(capsys, "traffic", "--rates", "1")[::2], "--target")
    assert_one_line_error(*run_cli(capsys, "traffic", "--replay", str(tmp_path / "none.json"))[::2], "none.json")


# -- into production --


def lane_run(lane, steps, rate=0.5):
    timings = (RequestTiming(0, 0.0, 0.0, 1.0, 2.0, 3),)
    return TrafficRun(lane, rate, 0, 4, timings, ((5, 6, 7),), tuple(steps), ())


def test_the_fastest_draft_length_at_each_batch_size_is_written_as_vllms_table():
    """Alone the draft at γ 4 served more tokens per second than plain; at 4 rows plain did: vLLM is told γ 4 up to
    3 rows and 0 from 4, and engines without a table to turn speculation off where it stopped paying."""
    plain = [BatchStep(1, 0, 1, 0.0, 0.2, 0.2, 0, 0, 1)] * 5 + [BatchStep(4, 0, 4, 0.0, 0.5, 0.5, 0, 0, 4)] * 5
    draft = [BatchStep(1, 4, 5, 0.1, 0.2, 0.3, 4, 2, 3)] * 5 + [BatchStep(4, 4, 20, 0.4, 1.2, 1.6, 16, 4, 8)] * 5
    few = [BatchStep(8, 4, 40, 0.1, 0.2, 0.3, 4, 2, 30)] * (MIN_STEPS - 1)  # too few steps at 8 rows to judge
    some = [BatchStep(4, 4, 8, 0.1, 0.5, 0.6, 4, 4, 8, drafting=1)] * 5  # one row of 4 drafting: no table says that
    view = TrafficView((0.5,), (PLAIN, "draft@4"), Slo(10.0, 1.0))
    for lane, steps in ((PLAIN, plain), ("draft@4", draft + few + some)):
        view.hear(News("run", lane=lane, run=lane_run(lane, steps), same=(True,)))
    assert best_gammas(view, "draft") == {1: 4, 4: 0}
    (advice,) = vllm_advice(view, "Qwen/Qwen2.5-Coder-0.5B-Instruct")
    assert advice.config["num_speculative_tokens_per_batch_size"] == [[1, 3, 4], [4, 4, 0]]
    assert advice.config["method"] == "draft_model"
    (line,) = view.turn_off_lines()
    assert line.startswith("draft@4: ")


def test_a_record_carries_the_vllm_table_its_run_wrote_and_its_replay_shows_it():
    """The table is written where the drafters are known (the run's process); a replay, torch-free, reads it back."""
    plain = [BatchStep(1, 0, 1, 0.0, 0.2, 0.2, 0, 0, 1)] * 5
    draft = [BatchStep(1, 4, 5, 0.1, 0.2, 0.3, 4, 2, 3)] * 5
    view = TrafficView((0.5,), (PLAIN, "draft@4"), Slo(10.0, 1.0))
    for lane, steps in ((PLAIN, plain), ("draft@4", draft)):
        view.hear(News("run", lane=lane, run=lane_run(lane, steps), same=(True,)))
    view.advice = vllm_advice(view, "Qwen/Qwen2.5-Coder-0.5B-Instruct")
    models = RunModels("t", "d", "t", "float32", "", "cpu", "")
    record = TrafficRecord.of(view, ["a"], [4], 2, Settings(), models, 1.0, "a test")
    again = TrafficRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert again.final_view().advice == view.advice and view.advice[0].config["num_speculative_tokens_per_batch_size"]
    older = record.to_json()
    del older["vllm"]
    assert TrafficRecord.from_json(older).final_view().advice == []


def test_a_lane_is_read_once_into_its_parts_and_written_back_as_every_screen_names_it():
    from specviz.settings import LaneName, parse_lane

    assert parse_lane(" draft@A8 ") == LaneName("draft", 8, True) and str(parse_lane("draft@A8")) == "draft@a8"
    assert parse_lane("ngram@4") == LaneName("ngram", 4) and str(parse_lane("ngram")) == "ngram"
    assert (
        parse_lane("draft@Table") == LaneName("draft", table=True) and str(parse_lane("draft@table")) == "draft@table"
    )
    with pytest.raises(InvalidRequest, match=r"^lane 'draft@x': after @ comes a draft length"):
        parse_lane("draft@x")
