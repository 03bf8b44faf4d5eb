"""Record assets/traces/, the app's recorded runs; run by a maintainer when traces must be made again.

Record the traces the app offers as "recorded runs" (assets/traces/), one per example prompt kind, with the
offline Qwen2.5-Coder 1.5B ← 0.5B pair on this machine's CPU in bfloat16:

    python scripts/record_traces.py            # about 3 minutes on 2 cores

Each is `python -m specviz generate ... --trace FILE`, so the trace also holds plain decoding and says in its
"made_with" field the exact command that made it."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specviz.drafters.registry import best_for  # noqa: E402

PAIR = ["--target", "qwen2.5-coder-1.5b-instruct", "--dtype", "bfloat16", "--max-new-tokens", "64", "--gamma", "4"]


def runs() -> dict:
    """file: (prompt kind, drafter flags, sampling flags). Extraction runs the drafter the benchmark measured fastest
    on it (a lookup, no draft model); the others the CLI's default drafter with the draft model."""
    extraction = best_for("extraction")[0].name
    return {
        "code-draft-model": ("code", ["--draft", "qwen2.5-coder-0.5b-instruct"], []),
        f"extraction-{extraction}": ("extraction", ["--drafter", extraction], []),
        "prose-draft-model-sampled": (
            "prose",
            ["--draft", "qwen2.5-coder-0.5b-instruct"],
            ["--temperature", "0.7", "--seed", "1"],
        ),
    }


def main() -> int:
    prompts = json.loads((ROOT / "assets" / "prompts.json").read_text())
    for name, (kind, drafter, sampling) in runs().items():
        out = ROOT / "assets" / "traces" / f"{name}.json"
        cmd = [
            sys.executable,
            "-m",
            "specviz",
            "generate",
            *PAIR,
            *drafter,
            *sampling,
            "--prompt",
            prompts[kind][0],
            "--trace",
            str(out.relative_to(ROOT)),
        ]
        print(" ".join(cmd[1:4]), "...", out.name, flush=True)
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
