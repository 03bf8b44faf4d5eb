"""The benchmark suite end to end on the tiny pair, the predictions behind its efficiency column, and the
set-acceptance-rate drafter it measures the engine with."""

import json
import math
import re

import pytest

from specviz.analysis.theory import (
    expected_tokens_per_step,
    iid_speedup,
    interpolate,
    per_token_alpha,
    predicted_speedup,
)
from specviz.bench.bench_report import markdown_report
from specviz.bench.measure import Run, typical
from specviz.bench.rows import BenchMeta, BenchRow, at_rate
from specviz.bench.tally import overlap, unsettled
from specviz.cli import build_parser, main
from specviz.cli.bench import plan_from
from specviz.drafters.registry import build_drafter, kinds
from specviz.engine import generate, new_generator
from specviz.errors import InvalidRequest
from specviz.events import StepEvent, depth_acceptance, generated_ids, summarize
from specviz.settings import Settings


def step(proposed: int, accepted: int, draft_s=0.0, forward_tokens=None) -> StepEvent:
    kind = "bonus" if accepted == proposed and proposed else "correction" if proposed else "plain"
    return StepEvent(
        0,
        tuple(range(proposed)),
        accepted,
        1,
        kind,
        (0.5,) * proposed,
        None,
        draft_s,
        0.0,
        0.0,
        forward_tokens=1 + proposed if forward_tokens is None else forward_tokens,
    )


def test_acceptance_by_position_counts_only_steps_that_reached_it():
    events = [step(3, 3), step(3, 1), step(3, 0), step(2, 2), step(0, 0)]
    # position 1: 4 tried, 3 accepted; position 2: tried by the 3 that accepted position 1, 2 kept it;
    # position 3: tried by the one 3-long step that got that far
    assert depth_acceptance(events, 4) == [0.75, 2 / 3, 1.0, None]


def test_the_prediction_charges_each_step_its_drafting_and_one_bare_forward():
    relative, v1 = {1: 1.0, 3: 1.2, 5: 1.6}, 0.5  # V(k) / V(1), and V(1) in seconds
    events = [step(4, 4, draft_s=0.4), step(4, 1, draft_s=0.4), step(0, 0), step(2, 2, forward_tokens=3)]
    tokens = 5 + 2 + 1 + 3
    spent = (0.4 + 0.8) + (0.4 + 0.8) + 0.5 + 0.6
    assert predicted_speedup(events, relative, v1) == pytest.approx(tokens * 0.5 / spent)
    assert interpolate(relative, 4) == pytest.approx(1.4) and interpolate(relative, 7) == pytest.approx(2.0)
    alpha = per_token_alpha(events)  # 7 accepted, 1 rejection
    assert alpha == pytest.approx(7 / 8)
    c = 0.8 / 10 / v1
    assert iid_speedup(events, relative, v1, 4) == pytest.approx(expected_tokens_per_step(alpha, 4) / (4 * c + 1.6))


def oracle_run(target, ids, alpha, gamma=4, max_new_tokens=200, seed=0):
    reference = generated_ids(generate(target, ids, Settings(max_new_tokens=max_new_tokens)))
    settings = Settings(max_new_tokens=max_new_tokens, gamma=gamma, seed=seed)
    drafter = build_drafter(
        "oracle", settings, new_generator(target.device, seed), target, options={"reference": reference, "alpha": alpha}
    )
    return reference, list(generate(target, ids, settings, drafter))


@pytest.mark.parametrize("alpha", [0.3, 0.8])
def test_the_oracle_drafter_is_accepted_at_its_set_rate(target, tokenizer, alpha):
    reference, events = oracle_run(target, tokenizer.encode("w1 w2 w3"), alpha)
    assert generated_ids(events) == reference
    tested = sum(e.accepted + (e.next_kind == "correction") for e in events)
    measured = per_token_alpha(events)
    assert abs(measured - alpha) < 4 * math.sqrt(alpha * (1 - alpha) / tested), (measured, tested)
    tau = summarize(events).mean_tokens_per_step  # the budget's last, shorter steps pull τ down a little
    assert tau == pytest.approx(expected_tokens_per_step(alpha, 4), rel=0.2)


def test_the_oracle_drafter_needs_greedy(target):
    with pytest.raises(InvalidRequest, match="temperature 0"):
        build_drafter("oracle", Settings(temperature=0.5), None, target, options={"reference": [1], "alpha": 1.0})


def test_the_bench_runs_a_bfloat16_target_both_ways_and_says_which_way_each_row_ran(capsys, pair_folders, tmp_path):
    target, draft = pair_folders
    models = ["--target", str(target), "--draft", str(draft), "--methods", "ngram,draft"]
    cells = "--kinds code --prompts-per-kind 1 --max-new-tokens 12 --gammas 3 --temperatures 0 --repeats 1"
    runs = "--dtype bfloat16 --draft-dtype bfloat16 --exact both"
    code = main(["bench", *models, *cells.split(), *runs.split(), "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    found = json.loads((tmp_path / "bench.json").read_text())
    rows = found["rows"]
    ours = [r for r in rows if r["library"] == "specviz"]
    assert {r["exact"] for r in ours} == {True, False}
    assert all(r["exact"] is None for r in rows if r["library"] == "transformers")  # its own kernels, always
    assert all(r["same_as_plain"] for r in ours if r["exact"] and r["method"] != "plain")
    assert found["meta"]["exact"] == "exact mode; exact mode off"
    assert "| ngram [exact off] | 3 |" in out and "| ngram | 3 |" in out


def test_the_bench_drafts_in_int8_on_a_cpu_as_every_command_does_unless_told_otherwise(pair_folders):
    target, draft = pair_folders
    flags = ["bench", "--target", str(target), "--draft", str(draft), "--methods", "draft", "--device", "cpu"]
    assert [d.precision for d in plan_from(build_parser().parse_args(flags)).drafts] == ["int8"]
    asked = build_parser().parse_args([*flags, "--draft-dtype", "bfloat16,float32"])
    assert [d.precision for d in plan_from(asked).drafts] == ["bfloat16", "float32"]


def test_bench_runs_every_method_and_writes_three_reports(
    thorough, capsys, pair_folders, pair_heads, pair_eagle, pair_dflash, tmp_path
):
    target, draft = pair_folders
    models = ["--target", str(target), "--draft", str(draft), "--medusa", str(pair_heads), "--eagle", str(pair_eagle)]
    models += ["--dflash", str(pair_dflash)]
    cells = "--kinds code,chat,context-120 --prompts-per-kind 1 --max-new-tokens 12 --gammas 1,3 --oracle-alphas 0,1"
    runs = "--repeats 1 --dtype float32 --draft-dtype float32,int8"
    code = main(["bench", *models, *cells.split(), *runs.split(), "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = json.loads((tmp_path / "bench.json").read_text())["rows"]
    ours = [r for r in rows if r["library"] == "specviz" and r["method"] != "plain"]
    greedy = [r for r in ours if r["temperature"] == 0]
    methods = {k.name for k in kinds(menu_only=True)} | {
        at_rate(k.name, a) for k in kinds() if k.listing.sets_alpha for a in (0, 1)
    }
    assert {(r["method"], r["gamma"]) for r in greedy if r["kind"] == "chat"} == {
        (m, g) for m in methods for g in (1, 3, "adaptive")
    }
    assert all(r["same_as_plain"] for r in greedy)  # fp32: every drafter, every γ, adaptive too
    assert not any(r["method"].startswith("oracle") for r in ours if r["temperature"] > 0)
    assert all(r["efficiency"] > 0 and r["predicted"] > 0 for r in ours)
    drafted = [r for r in ours if r["method"] == "draft"]  # the draft model at each precision, with its cost c
    assert {r["draft_dtype"] for r in ours if r["method"] == "hybrid"} == {"float32", "int8"}
    assert all(0 <= r["copied"] <= 1 and r["nodes"] >= 1 for r in ours if r["method"] == "hybrid")
    assert {r["draft_dtype"] for r in drafted} == {"float32", "int8"} and all(r["c"] > 0 for r in drafted)
    assert {r["draft_dtype"] for r in rows if r["method"] == "transformers assisted"} == {"float32", "int8"}
    oracle = {(r["method"], r["gamma"]): r for r in greedy if r["kind"] == "code"}
    assert oracle[("oracle α=1", 3)]["tau"] == 4.0 and oracle[("oracle α=0", 3)]["tau"] == 1.0
    theirs = {(r["method"], r["gamma"]) for r in rows if r["library"] == "transformers" and r["kind"] == "code"}
    assert {
        ("transformers plain", None),
        ("transformers assisted", 1),
        ("transformers assisted", "adaptive"),
        ("transformers prompt lookup", 3),
        ("transformers prompt lookup", "adaptive"),
    } <= theirs
    assert all(
        r["same_as_plain"] for r in rows if r["library"] == "transformers" and r.get("same_as_plain") is not None
    )
    references = [r for r in rows if r["method"] == "transformers plain" and r["temperature"] == 0]
    assert references and all(r["same_as_plain"] is True for r in references)  # specviz's plain = their generate
    assert "specviz's plain output identical to transformers' greedy generate: 3 of 3 prompts" in out
    report = (tmp_path / "bench.md").read_text()
    assert report.strip() == out.strip() and "### Targets" in report and "| chat | 0.7 | medusa | adaptive |" in report
    assert "### α and c per drafter and precision" in report and f"draft ({draft} int8)" in report
    assert "### The engine against the engine" in report and f"| code | 0 | {draft} int8 |" in report
    assert f"same draft ({draft} int8): specviz's draft model over transformers' assisted generation" in report
    assert "### Acceptance by draft position" in report and "| α_1 | α_2 | α_3 |" in report
    assert "| code | 0 | oracle α=1 | 3 | 1.00 | 1.00 | 1.00 | 1.00 |" in report  # always accepted, at every position
    assert "geometric mean over 6 kinds × temperatures" in report  # code, chat, context-120 at T 0 and 0.7
    long = [r for r in rows if r["kind"] == "context-120"]
    assert long and all(50 <= r["prompt_tokens"] <= 200 for r in long)  # about the asked length (words, here)
    assert "plain decoding at a " + str(long[0]["prompt_tokens"]) + "-token prompt, T 0:" in report
    html = (tmp_path / "bench.html").read_text()
    assert "plotly" in html and "efficiency of draft" in html and "<script>alert" not in html
    lookups = [r for r in rows if r["method"] == "transformers prompt lookup"]
    assert all(r["tau"] >= 1 and r["tps_range"][0] <= r["tps"] <= r["tps_range"][1] for r in lookups)
    assert "adaptive over the drafter's best fixed γ, tokens/s: lowest" in report
    assert "γ 3: τ ngram" in report and "transformers' prompt lookup" in report
    assert f"| hybrid ({draft} int8) |" in report and "| draft at fixed γ " in report  # vLLM's nearest, measured
    assert re.search(r"\| medusa \| [\d.]+x \| plain decoding: 1\.00x \(", report)  # transformers has no heads
    assert re.search(r"\| ngram \| [\d.]+x \| prompt lookup: [\d.]+x \(", report)


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--methods", "draft,magic"],
            "error: --methods must be some of " + ",".join(k.name for k in kinds()) + ", got 'draft,magic'",
        ),
        (["--oracle-alphas", "0.5,2"], "error: --oracle-alphas must be rates in [0, 1], got '0.5,2'"),
        (["--temperatures", "0,hot"], "error: --temperatures must look like 0,0.7, got '0,hot'"),
        (["--gammas", "0-40"], "error: gamma (draft length) must be an integer in 1..32, got 0"),
        (
            ["--kinds", "poetry"],
            "error: unknown prompt kind 'poetry'; kinds: code, extraction, prose, edit, repetitive, chat, "
            "translation, summarization, qa, math, rag, multi_turn, repeat_sql, repeat_fields, document, or context-N "
            "(a prompt of about N tokens)",
        ),
    ],
)
def test_bench_refuses_bad_input_in_one_line(capsys, pair_folders, flags, message):
    code = main(["bench", "--target", str(pair_folders[0]), *flags])
    _, err = capsys.readouterr()
    assert code == 2 and err.strip() == message


def test_a_repetition_workload_runs_in_order_and_drafts_from_earlier_runs(capsys, pair_folders, tmp_path):
    target, _ = pair_folders
    code = main(
        [
            "bench",
            "--target",
            str(target),
            "--methods",
            "suffix,history,ngram",
            "--kinds",
            "repeat_sql",
            "--prompts-per-kind",
            "3",
            "--max-new-tokens",
            "10",
            "--gammas",
            "4",
            "--temperatures",
            "0",
            "--repeats",
            "2",
            "--dtype",
            "float32",
            "--no-transformers",
            "--out",
            str(tmp_path),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = json.loads((tmp_path / "bench.json").read_text())["rows"]
    suffix = [r for r in rows if r["method"] == "suffix"]
    assert sorted({r["run_index"] for r in suffix}) == [0, 1, 2] and all(r["same_as_plain"] for r in suffix)
    assert "### Runs in order: drafting from earlier runs" in out and "| repeat_sql | 0 | 3 |" in out
    assert "suffix decoding from the third run on (1 runs, best γ each)" in out
    assert "suffix decoding on a first run with nothing cached, adaptive γ" in out


def test_a_cell_is_the_median_of_its_repeats_with_their_spread_and_overlapping_spreads_are_flagged():
    seconds = iter([4.0, 1.0, 2.0, 8.0, 3.0])  # tokens/s of 8 ids: 2, 8, 4, 1, 2.67
    kept = typical(lambda: Run(list(range(8)), next(seconds)), None, 5).ours
    assert kept.tps == 8 / 3.0 and kept.spread == (1.0, 8.0)
    assert overlap((1.0, 3.0), (2.5, 4.0)) and not overlap((1.0, 2.0), (2.5, 4.0))
    fast = BenchRow("k", "p", 0, "a", 1, "specviz", 10.0, 1.0, tps_range=(9.0, 11.0))
    slow = BenchRow("k", "p", 0, "b", 1, "specviz", 8.0, 1.0, tps_range=(7.0, 8.5))
    assert unsettled([fast], [slow]) == ""
    slow.tps_range = (7.0, 9.5)
    assert "not settled" in unsettled([fast], [slow])


def test_what_the_nearest_setting_gives_up_is_the_measured_ratio():
    """History lookup adaptive at 2x and 1.5x on two kinds; vLLM's nearest (suffix) is taken at its best fixed γ per
    kind, SGLang's (n-gram) too, transformers' as its prompt lookup over its own plain decoding."""

    def row(kind, method, gamma, speedup, library="specviz"):
        return BenchRow(kind, "p", 0.0, method, gamma, library, 10.0, speedup)

    rows = [
        row("code", "history", "adaptive", 2.0),
        row("chat", "history", "adaptive", 1.5),
        row("code", "suffix", 2, 1.0),
        row("code", "suffix", 4, 1.6),  # the best fixed γ on code
        row("chat", "suffix", 2, 1.2),
        row("code", "ngram", 3, 0.5),
        row("chat", "ngram", 3, 0.8),
        row("code", "transformers prompt lookup", "adaptive", 1.1, "transformers"),
        row("chat", "transformers prompt lookup", "adaptive", 0.9, "transformers"),
    ]
    report = markdown_report(rows, BenchMeta("t", None, (), "bfloat16", [], "cpu", 8, 1, [2, 4], [], 2, 0.1, "now"))
    line = next(x for x in report.splitlines() if x.startswith("| history |"))
    mine = math.sqrt(2.0 * 1.5)
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1] == f"{mine:.2f}x"
    assert cells[2] == f"prompt lookup: {math.sqrt(1.1 * 0.9):.2f}x ({math.sqrt(1.1 * 0.9) / mine:.2f})"
    assert cells[3] == f"suffix at fixed γ 2/4: {math.sqrt(1.6 * 1.2):.2f}x ({math.sqrt(1.6 * 1.2) / mine:.2f})"
    assert cells[4] == f"ngram at fixed γ 3: {math.sqrt(0.5 * 0.8):.2f}x ({math.sqrt(0.5 * 0.8) / mine:.2f})"
    assert "### Taking it to production: what the nearest setting gives up" in report
