"""A traffic run recorded: its rates, lanes, SLO, prompts (and their lengths in tokens), settings and models, and every
run of every lane in the order it ran, as one JSON file. Read back, it gives the same view, the simulator's checks
computed again from the runs, with no model loaded. Pure Python."""

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .. import reading as read
from ..errors import SpecvizError
from ..serving.batch_table import VllmAdvice
from ..trace import RunModels
from .simulator import held_out, project
from .traffic_plan import Slo
from .traffic_results import TrafficNews, TrafficRun
from .traffic_view import TrafficView

FORMAT = "specviz-traffic"
VERSION = 1


class TrafficRecordError(SpecvizError):
    """A file that is not a recorded traffic run, or one damaged."""


@dataclass
class TrafficRecord:
    rates: tuple[float, ...]
    lanes: tuple[str, ...]  # plain first
    slo: Slo
    rounds: int
    max_rows: int
    prompts: list[str]
    prompt_tokens: list[int]  # each prompt's length in the target's tokens, what the simulator reads prefill by
    settings: dict
    models: RunModels
    runs: list[tuple[TrafficRun, tuple[bool, ...] | None]]  # in the order they ran, with each request's identity
    notes: dict = field(default_factory=dict)
    created: str = ""
    wall_s: float = 0.0
    made_with: str = ""
    vllm: tuple[VllmAdvice, ...] = ()  # what the run measured, as vLLM's draft lengths per batch size

    @staticmethod
    def of(view: TrafficView, prompts, prompt_tokens, max_rows, settings, models, wall_s, made_with):
        """A finished (or stopped) run's view as a record."""
        return TrafficRecord(
            rates=view.rates,
            lanes=view.lanes,
            slo=view.slo,
            rounds=view.rounds,
            max_rows=max_rows,
            prompts=list(prompts),
            prompt_tokens=list(prompt_tokens),
            settings=dict(settings.__dict__),
            models=models,
            runs=list(view.order),
            notes=dict(view.notes),
            created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            wall_s=wall_s,
            made_with=made_with,
            vllm=tuple(view.advice),
        )

    def view(self) -> TrafficView:
        """The view the run ended with: every run heard again, the simulator checked against each rate."""
        view = TrafficView(self.rates, self.lanes, self.slo, self.rounds)
        view.notes = dict(self.notes)
        for run, same in self.runs:
            view.hear(TrafficNews("run", lane=run.lane, run=run, same=same))
        schedules = {}
        for run, _ in self.runs:
            schedules.setdefault(run.rate, tuple(t.arrival for t in run.timings))
        held_out(view, dict(enumerate(self.prompt_tokens)), schedules, self.max_rows)
        requests = max(len(arrivals) for arrivals in schedules.values()) if schedules else 0
        if requests:
            project(view, dict(enumerate(self.prompt_tokens)), requests, self.max_rows, self.settings.get("seed", 0))
        view.message, view.finished = "replayed", True
        view.advice = list(self.vllm)
        return view

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "version": VERSION,
            "created": self.created,
            "rates": list(self.rates),
            "lanes": list(self.lanes),
            "slo": {"ttft_s": self.slo.ttft_s, "tpot_s": self.slo.tpot_s},
            "rounds": self.rounds,
            "max_rows": self.max_rows,
            "prompts": self.prompts,
            "prompt_tokens": self.prompt_tokens,
            "settings": self.settings,
            "models": self.models.__dict__,
            "runs": [{**run.to_json(), "identical": None if same is None else list(same)} for run, same in self.runs],
            "notes": self.notes,
            "wall_s": self.wall_s,
            "made_with": self.made_with,
            "vllm": [advice.__dict__ for advice in self.vllm],
        }

    def save(self, path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_json(), ensure_ascii=False))
        return path

    @staticmethod
    def from_json(data) -> "TrafficRecord":
        if not is_traffic_record(data):
            raise TrafficRecordError(f'not a recorded traffic run (no "format": "{FORMAT}" in it)')
        if data.get("version") != VERSION:
            raise TrafficRecordError(f"the run's version is {read.shown(data.get('version'))}; this specviz reads 1")
        with read.damage_as(TrafficRecordError, "the recorded traffic run"):
            rates = read.each(read.number, data["rates"], "rates")
            lanes = read.each(read.text, data["lanes"], "lanes")
            prompts = list(read.each(read.text, data["prompts"], "prompts"))
            prompt_tokens = list(read.each(read.integer, data["prompt_tokens"], "prompt_tokens", 1))
            if len(prompt_tokens) != len(prompts) or not prompts:
                raise ValueError("prompt_tokens does not give one length per prompt")
            runs = []
            for i, item in enumerate(read.listed(data["runs"], "runs")):
                run = TrafficRun.from_json(item, f"runs[{i}]")
                if run.lane not in lanes or run.rate not in rates:
                    raise ValueError(f"runs[{i}] is of lane {run.lane!r} at {run.rate:g}/s, not one the record names")
                if any(t.prompt >= len(prompts) for t in run.timings):
                    raise ValueError(f"runs[{i}] asks a prompt the record does not hold")
                same = read.maybe(lambda v, w: read.each(read.flag, v, w), item.get("identical"), f"runs[{i}]")
                runs.append((run, same))
            slo = read.mapping(data["slo"], "slo")
            notes = read.mapping(data.get("notes", {}), "notes")
            return TrafficRecord(
                rates=rates,
                lanes=lanes,
                slo=Slo(read.number(slo["ttft_s"], "slo.ttft_s"), read.number(slo["tpot_s"], "slo.tpot_s")),
                rounds=read.integer(data["rounds"], "rounds", 1),
                max_rows=read.integer(data["max_rows"], "max_rows", 1),
                prompts=prompts,
                prompt_tokens=prompt_tokens,
                settings=dict(read.mapping(data["settings"], "settings")),
                models=RunModels.from_json(read.mapping(data["models"], "models")),
                runs=runs,
                notes={k: read.text(v, f"notes.{k}") for k, v in notes.items()},
                created=read.text(data.get("created", ""), "created"),
                wall_s=read.number(data.get("wall_s", 0.0), "wall_s"),
                made_with=read.text(data.get("made_with", ""), "made_with"),
                vllm=VllmAdvice.listed(data.get("vllm", [])),
            )

    @staticmethod
    def load(path) -> "TrafficRecord":
        return TrafficRecord.from_json(read.json_file_as(path, TrafficRecordError, "a recorded traffic run"))


def is_traffic_record(data) -> bool:
    """Whether parsed JSON names itself a recorded traffic run."""
    return isinstance(data, dict) and data.get("format") == FORMAT


def replay_traffic(
    record: TrafficRecord,
    speed: float = 1.0,
    stopped: Callable[[], bool] = lambda: False,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[TrafficView]:
    """The run again: each lane's run at each rate appears after its own duration (divided by `speed`; 0: at once),
    a view after each; the last one final, with the simulator's checks."""
    view = TrafficView(record.rates, record.lanes, record.slo, record.rounds)
    view.notes = dict(record.notes)
    for run, same in record.runs:
        if stopped():
            view.hear(TrafficNews("end", "replay stopped: the runs shown so far stay"))
            yield view
            return
        view.hear(TrafficNews("message", f"replaying {run.lane}: {len(run.timings)} requests at {run.rate:g}/s"))
        yield view
        if speed > 0:
            sleep(max((t.last_token for t in run.timings), default=0.0) / speed)
        view.hear(TrafficNews("run", lane=run.lane, run=run, same=same))
        yield view
    yield record.view()
