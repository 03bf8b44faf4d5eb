"""`python -m specviz workload` (or `compare`, its former name): one's own prompts file, every chosen drafter
against plain decoding, a report and its CSV written; every bad input one `error:` line, exit 2, and no report."""

import csv
import io

import pytest
from test_cli import assert_one_line_error, run_cli

from specviz.drafters.registry import kinds

EVIL = '<img src=x onerror="window.__pwned=1">'
DRAFT_MODEL = next(k.name for k in kinds(menu_only=True) if k.needs_draft is True)
LOOKUP = next(k.name for k in kinds(menu_only=True) if k.listing.lookup and not k.needs_draft)


def workload(folder, prompts, out, *extra):
    return [
        "workload",
        "--target",
        str(folder),
        "--prompts",
        str(prompts),
        "--out",
        str(out),
        "--dtype",
        "float32",
        "--device",
        "cpu",
        *extra,
    ]


def table(report):
    """The report's CSV, by drafter."""
    text = report.with_suffix(".csv").read_text(encoding="utf-8-sig")
    return {r["drafter"]: r for r in csv.DictReader(io.StringIO(text))}


@pytest.fixture
def prompts_file(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text(f"w1 w2 w3 w1 w2 w3\n\nw4 w5 {EVIL}\nw6\n\nw7 w8 w9\n", encoding="utf-8")
    return path


def test_workload_writes_a_report_and_its_table_with_every_greedy_output_identical(
    capsys, model_folder, prompts_file, tmp_path
):
    out = tmp_path / "report.html"
    code, printed, err = run_cli(
        capsys,
        *workload(
            model_folder,
            prompts_file,
            out,
            "--drafters",
            f"{DRAFT_MODEL},{LOOKUP}",
            "--draft",
            str(model_folder),
            "--draft-dtype",
            "float32",
            "--max-new-tokens",
            "12",
            "--gamma",
            "3",
        ),
    )
    assert code == 0, err
    assert printed.split() == [str(out), str(out.with_suffix(".csv"))]
    assert err.count("prompt 3/3") == 3 and "about" in err  # a line per finished run, with the time left
    page = out.read_text(encoding="utf-8")
    assert EVIL not in page and "&lt;img src=x" in page
    rows = table(out)
    assert set(rows) == {"plain", DRAFT_MODEL, LOOKUP}
    for name in (DRAFT_MODEL, LOOKUP):
        assert rows[name]["prompts"] == "3" and rows[name]["identical"] == "3", rows[name]


def test_a_drafter_the_models_cannot_run_is_listed_as_not_available(capsys, model_folder, prompts_file, tmp_path):
    out = tmp_path / "report.html"
    former_name = ["compare", *workload(model_folder, prompts_file, out, "--max-new-tokens", "4")[1:]]
    code, _, err = run_cli(capsys, *former_name)  # the command's name before `workload`, for scripts that use it
    assert code == 0, err
    rows = table(out)
    assert "needs a draft model" in rows[DRAFT_MODEL]["note"] and rows[LOOKUP]["prompts"] == "3"


def bad_inputs(tmp_path, prompts_file):
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "binary.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (tmp_path / "no-column.csv").write_text("id,question\n1,why\n")
    with (tmp_path / "huge.txt").open("wb") as f:
        f.truncate(50 << 20)
    (tmp_path / "many.txt").write_text("\n".join(f"w{i % 50}" for i in range(21)))
    return [
        ([str(tmp_path / "empty.txt")], [], "holds no prompts"),
        ([str(tmp_path / "binary.txt")], [], "not text"),
        ([str(tmp_path / "no-column.csv")], [], 'no "prompt" column'),
        ([str(tmp_path / "huge.txt")], [], "at most 1 MiB"),
        ([str(tmp_path / "missing.txt")], [], "cannot read"),
        ([str(tmp_path / "many.txt")], [], "21 prompts; this device runs at most 20"),
        ([str(prompts_file)], ["--drafters", "nonesuch"], "unknown drafter 'nonesuch'"),
        ([str(prompts_file)], ["--drafters", DRAFT_MODEL], f"--drafters {DRAFT_MODEL}: it needs a draft model"),
        ([str(prompts_file)], ["--adaptive"], "--adaptive goes with --gamma"),
        ([str(prompts_file)], ["--max-new-tokens", "0"], "max new tokens"),
    ]


def test_every_bad_input_is_one_line_and_writes_no_report(capsys, model_folder, prompts_file, tmp_path):
    out = tmp_path / "report.html"
    for prompts, extra, needle in bad_inputs(tmp_path, prompts_file):
        code, _, err = run_cli(capsys, *workload(model_folder, prompts[0], out, *extra))
        assert_one_line_error(code, err, needle)
        assert not out.exists() and not out.with_suffix(".csv").exists()
    for where, needle in ((tmp_path / "report.pdf", "is an .html file"), (tmp_path / "no" / "r.html", "no folder")):
        code, _, err = run_cli(capsys, *workload(model_folder, prompts_file, where))
        assert_one_line_error(code, err, needle)


def test_a_bfloat16_report_says_its_outputs_are_plain_decodings_bit_for_bit(
    capsys, model_folder, prompts_file, tmp_path
):
    """Exact mode by default for a bfloat16 target on a CPU: every greedy output identical, and the report says why."""
    for extra, grounds in (([], "bit for bit by construction"), (["--no-exact"], "a near tie can tip either way")):
        out = tmp_path / f"report{len(extra)}.html"
        args = workload(model_folder, prompts_file, out, "--drafters", LOOKUP, "--max-new-tokens", "12", *extra)
        args[args.index("float32")] = "bfloat16"
        code, _, err = run_cli(capsys, *args)
        assert code == 0, err
        facts = out.read_text(encoding="utf-8").split('<dl class="rp-facts">')[1].split("</dl>")[0]
        assert grounds in facts
        if not extra:
            assert table(out)[LOOKUP]["identical"].startswith("3")
