"""Build, check and upload the Space's folder; run by whoever publishes the Space.

Build the folder a Hugging Face Space is made from, check it, and (with a token) create the Space and upload it.

    python scripts/push_space.py --out build/space --dry-run                 # build and check only
    python scripts/push_space.py --repo you/specviz --hardware l4x1          # an L4 Space (the suggested hardware)
    python scripts/push_space.py --repo you/specviz --hardware zero-a10g     # a ZeroGPU Space

The folder holds only what the Space runs (scripts/check_space.py's space_files: the app, its package, its assets,
the requirements, the README's front matter, .gitattributes). The upload goes through huggingface_hub's HTTP API,
which sends every file .gitattributes routes through LFS/Xet (and the Hub refuses binaries or files over 10 MB
otherwise), so this repository's own git history, where the heads are plain objects, is never pushed.

ZeroGPU runs only some torch versions (the Hub's ZeroGPU page lists 2.8.0 to 2.11.0, Python 3.10 or 3.12): for it the
folder's requirements.txt pins torch 2.11.0 from the package registry and the front matter asks for Python 3.12.
An L4 keeps the tested torch 2.13.0, built for CUDA 12.9.
"""

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_space import ROOT, check, space_files  # noqa: E402

ZERO_TORCH = "torch==2.11.0"
ZERO_PYTHON = "3.12"


def build(out: Path, hardware: str) -> Path:
    if out.exists():
        shutil.rmtree(out)
    for name in space_files(ROOT):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, out / name)
    if hardware.startswith("zero"):
        requirements = out / "requirements.txt"
        lines = [
            line
            for line in requirements.read_text().splitlines()
            if not line.startswith(("--extra-index-url", "torch=="))
        ]
        lines.insert(0, f"# ZeroGPU: a torch version its GPU workers support\n{ZERO_TORCH}")
        requirements.write_text("\n".join(lines) + "\n")
        readme = out / "README.md"
        text = readme.read_text(encoding="utf-8")
        text = re.sub(r"^python_version: .*$", f'python_version: "{ZERO_PYTHON}"', text, count=1, flags=re.M)
        text = re.sub(r"^suggested_hardware: .*\n", "", text, count=1, flags=re.M)  # ZeroGPU is set on the Space
        readme.write_text(text, encoding="utf-8")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", help="the Space's id, owner/name (needs a token: `hf auth login` or HF_TOKEN)")
    p.add_argument("--hardware", default="l4x1", help="l4x1 (suggested), zero-a10g (ZeroGPU), cpu-basic, ...")
    p.add_argument("--out", help="where to build the folder (default: a temporary one)")
    p.add_argument("--private", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="build and check the folder, upload nothing")
    args = p.parse_args()
    if not args.dry_run and not args.repo:
        p.error("--repo is needed to upload (or --dry-run)")
    out = build(Path(args.out or tempfile.mkdtemp(prefix="specviz-space-")).resolve(), args.hardware)
    problems = check(out)
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    if problems:
        return 1
    print(f"built {out} ({len(space_files(out))} files) for {args.hardware}")
    if args.dry_run:
        return 0
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(
        args.repo,
        repo_type="space",
        space_sdk="gradio",
        space_hardware=args.hardware,
        private=args.private,
        exist_ok=True,
    )
    api.upload_folder(
        repo_id=args.repo,
        repo_type="space",
        folder_path=str(out),
        commit_message="specviz: upload from scripts/push_space.py",
    )
    print(f"uploaded: https://huggingface.co/spaces/{args.repo}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
