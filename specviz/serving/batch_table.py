"""A concurrency sweep's measurements as vLLM's `--speculative-config`: for a drafter vLLM also has, the draft length
that served the most tokens/s at each concurrency level run (0 where plain decoding served more), as the ranges of
`num_speculative_tokens_per_batch_size` ([first batch size, last batch size, draft tokens]); for one it lacks, why."""

import json
from dataclasses import dataclass

from .. import reading as read
from ..settings import MAX_GAMMA, Settings
from .declaration import Serving
from .engine_settings import why_none
from .handoff import Ran
from .vllm_setting import in_vllm, vllm_config


@dataclass(frozen=True)
class VllmAdvice:
    drafter: str
    config: dict | None  # the --speculative-config object; None where vLLM has no such method
    note: str  # how it was chosen, or why there is none

    @property
    def flag(self) -> str:
        return "" if self.config is None else f"--speculative-config '{json.dumps(self.config)}'"

    @staticmethod
    def from_json(data, where: str) -> "VllmAdvice":
        data = read.mapping(data, where)
        config = read.maybe(lambda v, w: dict(read.mapping(v, w)), data.get("config"), f"{where}.config")
        return VllmAdvice(
            read.text(data["drafter"], f"{where}.drafter"), config, read.text(data["note"], f"{where}.note")
        )

    @staticmethod
    def listed(data) -> tuple["VllmAdvice", ...]:
        """A record's "vllm" list (none in older records), each piece checked."""
        return tuple(VllmAdvice.from_json(a, f"vllm[{i}]") for i, a in enumerate(read.listed(data, "vllm")))


def ranges(best: dict[int, int]) -> list[list[int]]:
    """[first, last, γ] per run of levels that chose the same γ; a level's range reaches up to the next level run."""
    levels = sorted(best)
    out = []
    for i, level in enumerate(levels):
        last = levels[i + 1] - 1 if i + 1 < len(levels) else level
        if out and out[-1][2] == best[level]:
            out[-1][1] = last
        else:
            out.append([level, last, best[level]])
    return out


def read_table(value, what: str) -> tuple:
    """A table of [first batch size, last batch size, draft tokens] ranges, ascending and apart, each draft length in
    0..MAX_GAMMA (all 0 where plain decoding served best at every size measured): as a tuple of tuples; ValueError
    naming `what` otherwise."""
    ranges_read = read.each(read.listed, value, what)
    if not ranges_read:
        raise ValueError(f"{what} is empty")
    table = []
    for i, item in enumerate(ranges_read):
        if len(item) != 3:
            raise ValueError(f"{what}[{i}] is {read.shown(item)}, not [first batch size, last batch size, γ]")
        first = read.integer(item[0], f"{what}[{i}][0]", 1, 4096)
        last = read.integer(item[1], f"{what}[{i}][1]", first, 4096)
        if table and first <= table[-1][1]:
            raise ValueError(f"{what}[{i}] starts at {first}, inside the range before it")
        table.append((first, last, read.integer(item[2], f"{what}[{i}][2]", 0, MAX_GAMMA)))
    return tuple(table)


ANY_DRAFTER = "*"  # the key of a table read from a bare vLLM config, which names no drafter of ours


def tables_in(data) -> dict[str, tuple]:
    """Tables of γ by batch size in parsed JSON: a recorded sweep or traffic run (its "vllm" list: drafter -> the
    table its runs measured), or a vLLM speculative config (its num_speculative_tokens_per_batch_size, for any
    drafter). ValueError naming the field where neither is there or a table is damaged."""
    key = "num_speculative_tokens_per_batch_size"
    if isinstance(data, dict) and key in data:
        return {ANY_DRAFTER: read_table(data[key], key)}
    if not (isinstance(data, dict) and "vllm" in data):
        raise ValueError(f"neither a recorded sweep or traffic run (a 'vllm' list) nor a vLLM config ('{key}')")
    found = {}
    for i, advice in enumerate(VllmAdvice.listed(data["vllm"])):
        if advice.config is not None and key in advice.config:
            found[advice.drafter] = read_table(advice.config[key], f"vllm[{i}].config.{key}")
    if not found:
        raise ValueError("the record measured no table of γ by batch size (no drafter vLLM also has ran)")
    return found


def per_batch_size(best: dict[int, int]) -> tuple:
    """The table a Ran carries (Ran.per_batch_size) from the fastest γ at each level."""
    return tuple(map(tuple, ranges(best)))


def vllm_advice(drafter: str, serving: Serving, best: dict[int, int], draft_model: str = "") -> VllmAdvice:
    """The measured table as the config a race's vLLM setting is written with (`best`: level -> the fastest γ, 0 for
    plain decoding; `draft_model`: as vLLM loads it, a Hub id), or why vLLM has none for this drafter."""
    ran = Ran(drafter, Settings(), draft=draft_model, per_batch_size=per_batch_size(best), serving=serving)
    if not in_vllm(serving):
        return VllmAdvice(drafter, None, why_none("vLLM", ran))
    note = (
        f"the fastest draft length at each level run ({', '.join(f'{b}: {k}' for b, k in sorted(best.items()))}); "
        f"above {max(best)} requests nothing was measured"
    )
    return VllmAdvice(drafter, vllm_config(ran), note)
