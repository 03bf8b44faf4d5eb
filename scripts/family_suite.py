"""The task families against transformers' best method, one scoreboard; run alone before a speed claim.

The families are assets/prompts.json's coding, writing (prose), translation, summarization, question answering,
math and retrieval-augmented answers (rag), on the offline pair; then long documents to be returned with one edit
(document), where copying should win.

Each family is one `python -m specviz bench` of its own (a bfloat16 target on transformers, the int8 0.5B draft,
96 greedy tokens, medians of --repeats, each cell alternating with transformers' counterpart), so a suite cut short
keeps the families it finished; a family whose bench.json is already in --out is read, not run again. specviz runs
plain decoding, the draft model, the hybrid, n-gram and suffix lookup at γ 4 and adaptive; transformers runs plain
decoding, assisted generation with the same draft at 4 tokens and at its own schedule, and prompt lookup at 4 and
at its recommended 10 tokens. The scoreboard (specviz/bench/scoreboard.py) is printed and written to
--out/scoreboard.md with the command, the CPU and each family's date. Run it alone: nothing else on the machine.

    python scripts/family_suite.py [--out family-results] [--kinds code,prose,...] [--repeats 3] [--report-only]
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specviz.bench.rows import BenchRow  # noqa: E402
from specviz.bench.scoreboard import scoreboard_table  # noqa: E402
from specviz.models.kernel_costs import device_name  # noqa: E402

FAMILIES = ("code", "prose", "translation", "summarization", "qa", "math", "rag", "document")
BENCH = (
    "--target qwen2.5-coder-1.5b-instruct --draft qwen2.5-coder-0.5b-instruct --draft-dtype int8 --dtype bfloat16 "
    "--runtime transformers --methods draft,hybrid,ngram,suffix --prompts-per-kind 1 --temperatures 0 --gammas 4 "
    "--max-new-tokens 96"
).split()


def run_family(kind: str, out: Path, repeats: int) -> int:
    """One family's bench into out/kind, its progress in out/kind.log; the bench's exit status."""
    command = [sys.executable, "-m", "specviz", "bench", *BENCH, "--kinds", kind, "--repeats", str(repeats)]
    with open(out / f"{kind}.log", "w") as log:
        status = subprocess.run([*command, "--out", str(out / kind)], cwd=ROOT, stdout=log, stderr=log).returncode
    if (out / kind).is_dir():  # the bench records only "cpu"; the model and its instructions matter
        (out / kind / "cpu.txt").write_text(this_cpu() + "\n")
    return status


def this_cpu() -> str:
    return device_name(torch.device("cpu"))


def read_family(folder: Path) -> tuple[dict, list[BenchRow]]:
    """A bench.json's meta and rows."""
    saved = json.loads((folder / "bench.json").read_text())
    return saved["meta"], [BenchRow.from_json(r) for r in saved["rows"]]


def scoreboard(out: Path, kinds: list[str], repeats: int) -> str:
    """The scoreboard over the families found in out, with how and where each ran."""
    metas, rows = {}, []
    for kind in kinds:
        if (out / kind / "bench.json").exists():
            metas[kind], found = read_family(out / kind)
            rows += found
    if not rows:
        return "no family has finished"
    cpus = {(out / k / "cpu.txt").read_text().strip() if (out / k / "cpu.txt").exists() else "" for k in metas}
    devices = sorted(c or f"{this_cpu()} (read when reporting; a family recorded no CPU)" for c in cpus)
    ran = ", ".join(f"{k} {m['when']} ({m['minutes']} min)" for k, m in metas.items())
    missing = [k for k in kinds if k not in metas]
    return "\n\n".join(
        [
            f"`python scripts/family_suite.py --repeats {repeats}`: each family `python -m specviz bench "
            f"{' '.join(BENCH)} --kinds KIND --repeats {repeats}`",
            f"CPU: {'; '.join(devices)}. Finished: {ran}." + (f" Not run: {', '.join(missing)}." if missing else ""),
            scoreboard_table(rows),
        ]
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="family-results", help="folder for each family's bench and the scoreboard")
    p.add_argument("--kinds", default=",".join(FAMILIES), help="the families, in the order they run")
    p.add_argument("--repeats", type=int, default=3, help="runs per cell; the median is kept")
    p.add_argument("--report-only", action="store_true", help="run nothing: the scoreboard of what is in --out")
    args = p.parse_args()
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(json.loads((ROOT / "assets" / "prompts.json").read_text())))
    if unknown or not kinds or args.repeats < 1:
        what = f"unknown prompt kinds: {', '.join(unknown)}" if unknown else "--kinds and --repeats ≥ 1 are needed"
        print(f"error: {what}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for kind in kinds:
        if not args.report_only and not (out / kind / "bench.json").exists():
            print(f"{kind}: running (progress in {out / kind}.log)", file=sys.stderr, flush=True)
            if run_family(kind, out, args.repeats):
                print(f"{kind}: the bench failed; see {out / kind}.log", file=sys.stderr)
    report = scoreboard(out, kinds, args.repeats)
    (out / "scoreboard.md").write_text(report + "\n")
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
