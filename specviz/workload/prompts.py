"""A workload of one's own: prompts pasted (one per line, or blocks separated by a blank line) or read from a .txt,
.jsonl (a `prompt` or `turns` field per line) or .csv (a `prompt` column) file, and the bounds a device can run in
one go. Pure Python: the app's server and the CLI check a workload before any model is asked for anything."""

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidRequest
from ..settings import check_prompt

MAX_FILE_BYTES = 1 << 20  # 1 MiB of prompts is thousands of them: far past what one run compares
SUFFIXES = (".txt", ".jsonl", ".csv")


class WorkloadError(InvalidRequest):
    """Prompts that cannot be read, or more than the device runs in one go."""


@dataclass(frozen=True)
class Limits:
    """What one workload may ask of a device: prompts, and tokens to read and write in all (every prompt read and
    its new tokens written once by plain decoding and once by each drafter)."""

    prompts: int
    tokens: int


# On a 2-core CPU a 1.5B target writes ~10 tokens/s: 20 prompts × 7 sides × 128 tokens is about half an hour.
CPU_LIMITS = Limits(prompts=20, tokens=20_000)
GPU_LIMITS = Limits(prompts=100, tokens=400_000)


def limits_for(device: str) -> Limits:
    """The bounds for a device type ("cpu", "cuda", "mps")."""
    return CPU_LIMITS if device == "cpu" else GPU_LIMITS


def split_pasted(text: str) -> list[str]:
    """Pasted prompts: blocks separated by a blank line when there is one (a prompt may then span lines), else one
    prompt per line."""
    text = (text or "").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if any(not line.strip() for line in lines[1:-1]) and any(line.strip() for line in lines):
        blocks = []
        block = []
        for line in [*lines, ""]:
            if line.strip():
                block.append(line)
            elif block:
                blocks.append("\n".join(block).strip())
                block = []
        return blocks
    return [line.strip() for line in lines if line.strip()]


def read_prompts(path: str | Path, name: str | None = None) -> list[str]:
    """The prompts in a file, by its suffix (`name`: the file's own name when `path` is an upload's temporary copy).
    An empty, binary, oversized or malformed file raises WorkloadError in one line."""
    path, name = Path(path), name or Path(path).name
    suffix = Path(name).suffix.lower()
    if suffix not in SUFFIXES:
        raise WorkloadError(
            f"{name}: prompts come in a .txt, .jsonl or .csv file, not {suffix or 'a file with no suffix'}"
        )
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise WorkloadError(f"{name} is {size / 2**20:.1f} MiB; a prompt file may be at most 1 MiB")
        data = path.read_bytes()
    except OSError as exc:
        raise WorkloadError(f"cannot read {name}: {exc.strerror or exc}") from None
    if b"\0" in data:
        raise WorkloadError(f"{name} is not text (it holds NUL bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{name} is not UTF-8 text (byte {exc.start} cannot be read)") from None
    prompts = split_pasted(text) if suffix == ".txt" else (_jsonl if suffix == ".jsonl" else _csv)(text, name)
    if not prompts:
        raise WorkloadError(f"{name} holds no prompts")
    return prompts


def _jsonl(text: str, name: str) -> list[str]:
    prompts = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"{name} line {number} is not JSON: {exc.msg}") from None
        prompts.append(_prompt_of(record, f"{name} line {number}"))
    return prompts


def _prompt_of(record, where: str) -> str:
    """A JSON line's prompt: its `prompt`, or the first of its `turns` (later turns answer a reply that a single
    generation does not have)."""
    if not isinstance(record, dict):
        raise WorkloadError(f'{where} is not a JSON object with a "prompt" or "turns" field')
    value = record.get("prompt")
    if value is None and isinstance(record.get("turns"), list) and record["turns"]:
        value = record["turns"][0]
        value = value.get("content") if isinstance(value, dict) else value
    if not isinstance(value, str) or not value.strip():
        raise WorkloadError(f'{where} has no "prompt" text (nor a first of its "turns")')
    return value.strip()


def _csv(text: str, name: str) -> list[str]:
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise WorkloadError(f"{name} is not CSV: {exc}") from None
    if not rows:
        return []
    header = [h.strip().lower() for h in rows[0]]
    if "prompt" not in header:
        found = ", ".join(repr(h) for h in rows[0][:6]) or "none"
        raise WorkloadError(f'{name} has no "prompt" column (its columns: {found})')
    column = header.index("prompt")
    return [row[column].strip() for row in rows[1:] if len(row) > column and row[column].strip()]


def check_workload(prompts: list[str], limits: Limits, prompt_tokens: int, sides: int, max_new_tokens: int) -> None:
    """Whether a workload fits: its prompts valid text, their number, and the tokens it reads and writes in all
    (`prompt_tokens` in all, each read and followed by `max_new_tokens` on every one of `sides`)."""
    if not prompts:
        raise WorkloadError(
            "no prompts: paste some (one per line, or blocks separated by a blank line) or upload a file"
        )
    for number, prompt in enumerate(prompts, 1):
        try:
            check_prompt(prompt)
        except InvalidRequest as exc:
            raise WorkloadError(f"prompt {number}: {exc}") from None
    if len(prompts) > limits.prompts:
        raise WorkloadError(f"{len(prompts)} prompts; this device runs at most {limits.prompts} in one go")
    total = sides * (prompt_tokens + len(prompts) * max_new_tokens)
    if total > limits.tokens:
        raise WorkloadError(
            f"{len(prompts)} prompts on {sides} sides (plain and each drafter) read and write up to {total:,} tokens; "
            f"this device takes at most {limits.tokens:,} in one go: fewer prompts, drafters or new tokens"
        )
