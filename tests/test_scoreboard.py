"""The family scoreboard: each library's fastest method per kind, the ratios drawn from them, the geometric mean, and
every kind that misses a target named with its figure."""

import math

from specviz.bench.bench_report import markdown_report
from specviz.bench.rows import BenchMeta, BenchRow
from specviz.bench.scoreboard import lines, scoreboard_table


def row(kind, method, gamma, tps, library="specviz", spread=None, same=None):
    low, high = spread or (tps, tps)
    return BenchRow(
        kind, "p", 0.0, method, gamma, library, tps, 1.0, (low, high), same_as_plain=same, prompt_tokens=100
    )


ROWS = [
    # code: specviz's hybrid beats assisted generation by 1.25, clear of its spread
    row("code", "plain", None, 5.0),
    row("code", "transformers plain", None, 5.2, "transformers"),
    row("code", "hybrid", "adaptive", 12.5, spread=(12.0, 13.0), same=True),
    row("code", "draft", 4, 9.0, same=True),
    row("code", "oracle α=0.9", 4, 40.0),  # a measuring tool: never specviz's best
    row("code", "transformers assisted", "adaptive", 10.0, "transformers", (9.5, 10.5), True),
    row("code", "transformers prompt lookup", 4, 6.0, "transformers", same=True),
    # rag: transformers' prompt lookup wins, its output not its plain's; specviz's plain is slow
    row("rag", "plain", None, 2.4),
    row("rag", "transformers plain", None, 3.5, "transformers"),
    row("rag", "suffix", "adaptive", 3.0, spread=(2.8, 3.2), same=True),
    row("rag", "transformers prompt lookup", "adaptive", 5.0, "transformers", (3.1, 5.5), False),
]


def test_each_library_is_scored_by_its_fastest_method_and_no_measuring_tool():
    code, rag = lines(ROWS)
    assert (code.best.name, code.best.gamma, code.best.tps) == ("hybrid", "adaptive", 12.5)
    assert (code.hf_best.name, code.hf_best.tps) == ("transformers assisted", 10.0)
    assert code.lookup.tps == 6.0 and code.hf_plain.tps == 5.2
    assert (rag.hf_best.name, rag.hf_best.same) == ("transformers prompt lookup", False)


def test_the_table_gives_the_ratios_and_marks_what_the_runs_do_not_settle():
    table = scoreboard_table(ROWS)
    code = next(x for x in table.splitlines() if x.startswith("| code |"))
    cells = [c.strip() for c in code.strip("|").split("|")]
    assert cells[5] == f"{5.0 / 5.2:.2f}"  # plain ÷ plain: single runs, no spread to overlap
    assert cells[6] == "12.50 (hybrid, γ adaptive)"
    assert cells[8] == "1.25" and cells[9] == f"{12.5 / 6.0:.2f}"
    rag = next(x for x in table.splitlines() if x.startswith("| rag |"))
    cells = [c.strip() for c in rag.strip("|").split("|")]
    assert cells[7] == "5.00 (transformers prompt lookup, γ adaptive) ≠ plain"
    assert cells[8] == "0.60~"  # 2.8–3.2 against 3.1–5.5


def test_the_verdicts_give_the_geometric_mean_and_name_each_kind_behind():
    table = scoreboard_table(ROWS)
    mean = math.sqrt(12.5 / 5.2 * 3.0 / 3.5)
    assert f"geometric mean over 2 kinds × temperatures: {mean:.2f}x" in table
    assert "best ÷ best ≥ 1.2 on 1 of 2 kinds; behind: rag 0.60" in table
    assert f"plain ÷ plain ≥ 0.95 on 1 of 2 kinds; behind: rag {2.4 / 3.5:.2f}" in table
    assert "best ÷ transformers' prompt lookup ≥ 1 on 1 of 2 kinds; behind: rag 0.60" in table


def test_the_report_opens_with_the_scoreboard_and_leaves_it_out_without_a_race():
    meta = BenchMeta("t", None, (), "bfloat16", [], "cpu", 8, 1, [4], [], 2, 0.1, "now")
    report = markdown_report(ROWS, meta)
    assert report.index("### The scoreboard") < report.index("### Targets")
    alone = [r for r in ROWS if r.library == "specviz" and r.method == "plain"]
    assert "### The scoreboard" not in markdown_report(alone, meta)
