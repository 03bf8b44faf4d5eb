"""Is a model folder whole? Checked before any weights are read, so a damaged folder is refused in one line that
names the file, never half-loaded. A converted offline model records every file it wrote, with its size; any other
folder is checked by what can be read cheaply: each safetensors file's header against the file's length, and a
tokenizer being present."""

import json
import struct
from pathlib import Path

MANIFEST = "specviz-source.json"  # written last by a conversion: its presence means the conversion finished
# any one of them makes a loadable tokenizer
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "vocab.json",
    "vocab.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
)


def file_sizes(folder: Path) -> dict[str, int]:
    """Every file under `folder` by its relative path, with its size: what a conversion records."""
    return {str(p.relative_to(folder)): p.stat().st_size for p in sorted(folder.rglob("*")) if p.is_file()}


def safetensors_problem(path: Path) -> str | None:
    """Why `path` is not a whole safetensors file (its header names where the last tensor ends), or None."""
    size = path.stat().st_size
    try:
        with open(path, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            if length > size - 8:
                return f"{path.name} is cut short ({size} bytes; its header alone needs {8 + length})"
            header = json.loads(f.read(length))
    except (struct.error, ValueError, UnicodeDecodeError):
        return f"{path.name} is not a readable safetensors file (its header is damaged)"
    end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
    if size != 8 + length + end:
        return f"{path.name} is {size} bytes, but its header describes {8 + length + end}"
    return None


def folder_problem(folder: Path) -> str | None:
    """The first thing wrong with a model folder, in words naming the file, or None."""
    manifest = folder / MANIFEST
    recorded = None
    if manifest.is_file():
        try:
            recorded = json.loads(manifest.read_text()).get("files")
        except ValueError:
            return f"{MANIFEST} is damaged"
    if recorded:  # a converted offline model: every file it wrote, at the size it wrote
        for name, size in recorded.items():
            path = folder / name
            if not path.is_file():
                return f"{name} is missing"
            if path.stat().st_size != size:
                return f"{name} is {path.stat().st_size} bytes, but {size} were written"
    if not (folder / "config.json").is_file():
        return "config.json is missing"
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        return f"the tokenizer is missing (none of {', '.join(TOKENIZER_FILES)})"
    for path in sorted(folder.glob("*.safetensors")):
        problem = safetensors_problem(path)
        if problem:
            return problem
    return None
