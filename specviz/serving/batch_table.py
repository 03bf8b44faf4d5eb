"""A concurrency sweep's measurements as vLLM's `--speculative-config`: for a drafter vLLM also has, the draft length
that served the most tokens/s at each concurrency level run (0 where plain decoding served more), as the ranges of
`num_speculative_tokens_per_batch_size` ([first batch size, last batch size, draft tokens]); for one it lacks, why."""

import json
from dataclasses import dataclass

from .. import reading as read
from ..settings import Settings
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
