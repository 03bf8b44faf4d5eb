"""A run under load recorded as one JSON file: a concurrency sweep ("specviz-concurrency": its levels) or a traffic
run ("specviz-traffic": its rates, SLO and the prompts' lengths in tokens), with the lanes, prompts, settings and
models and every run of every lane in the order it ran. Read back with no model loaded, it replays (the runs shown
again in turn, at their own pace or faster) and gives the view the run ended with (for traffic, the simulator's
checks computed again from the runs). Pure Python."""

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from .. import reading as read
from ..errors import SpecvizError
from ..serving.batch_table import VllmAdvice
from ..trace import RunModels
from .levels_view import ConcurrencyView
from .rates_view import TrafficView
from .results import LevelRun, News, TrafficRun
from .simulator import held_out, project
from .traffic_plan import Slo

CONCURRENCY = "specviz-concurrency"
TRAFFIC = "specviz-traffic"
EARLIER_NAMES = {"specviz-load": CONCURRENCY}  # what a format was called before: such records still read
VERSION = 1


class RecordError(SpecvizError):
    """A file that is not a recorded run under load (a concurrency sweep or traffic), or one damaged."""


@dataclass(kw_only=True)
class RecordFile:
    """What both kinds of record keep besides their points, and how a record is written and read back."""

    prompts: list[str]
    settings: dict
    models: RunModels
    runs: list  # (run, each request's identity or None), in the order they ran
    notes: dict = field(default_factory=dict)  # lane -> why it could not run
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    wall_s: float = 0.0
    made_with: str = ""
    vllm: tuple[
        VllmAdvice, ...
    ] = ()  # what the run measured, as vLLM's draft lengths (none in older concurrency sweeps)
    FORMAT: ClassVar[str]
    WHAT: ClassVar[str]  # "a recorded sweep", in words
    RUN: ClassVar[type]  # what one run of it is
    POINTS: ClassVar[str]  # the field naming its points

    def points_json(self) -> dict:
        raise NotImplementedError

    def to_json(self) -> dict:
        return {
            "format": self.FORMAT,
            "version": VERSION,
            "created": self.created,
            **self.points_json(),
            "prompts": self.prompts,
            "settings": self.settings,
            "models": self.models.__dict__,
            "notes": self.notes,
            "runs": [{**run.to_json(), "identical": None if same is None else list(same)} for run, same in self.runs],
            "wall_s": self.wall_s,
            "made_with": self.made_with,
            "vllm": [advice.__dict__ for advice in self.vllm],
        }

    def save(self, path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_json(), ensure_ascii=False))
        return path

    @classmethod
    def from_json(cls, data):
        """A record of this kind, every field checked: a RecordError naming what is wrong, in one line."""
        if kind_of(data) is not cls:
            raise RecordError(f'not {cls.WHAT} (no "format": "{cls.FORMAT}" in it)')
        if data.get("version") != VERSION:
            raise RecordError(f"the record's version is {read.shown(data.get('version'))}; this specviz reads 1")
        with read.damage_as(RecordError, f"the {cls.WHAT[2:]}"):
            runs = []
            for i, item in enumerate(read.listed(data["runs"], "runs")):
                run = cls.run_of(item, f"runs[{i}]", data)
                same = read.maybe(lambda v, w: read.each(read.flag, v, w), item.get("identical"), f"runs[{i}]")
                runs.append((run, same))
            notes = read.mapping(data.get("notes", {}), "notes")
            return cls.points_from_json(
                data,
                prompts=list(read.each(read.text, data["prompts"], "prompts")),
                settings=dict(read.mapping(data["settings"], "settings")),
                models=RunModels.from_json(read.mapping(data["models"], "models")),
                runs=runs,
                notes={k: read.text(v, f"notes.{k}") for k, v in notes.items()},
                created=read.text(data.get("created", ""), "created"),
                wall_s=read.number(data.get("wall_s", 0.0), "wall_s"),
                made_with=read.text(data.get("made_with", ""), "made_with"),
                vllm=VllmAdvice.listed(data.get("vllm", [])),
            )

    @classmethod
    def run_of(cls, item, at: str, data: dict):
        """One recorded run, of a lane and a point the record names."""
        run = cls.RUN.from_json(item, at)
        if run.lane not in data["lanes"] or run.point not in data[cls.POINTS]:
            raise ValueError(f"{at} ({run.words()}) is not of a lane and {cls.POINTS[:-1]} the record names")
        return run

    @staticmethod
    def kept_of(view, prompts, settings, models: RunModels, wall_s: float, made_with: str) -> dict:
        """What either kind keeps of a finished (or stopped) run's view and where it ran, as the fields above."""
        return dict(prompts=list(prompts), settings=dict(settings.__dict__), models=models, runs=list(view.order),
                    notes=dict(view.notes), wall_s=wall_s, made_with=made_with, vllm=tuple(view.advice))  # fmt: skip

    @classmethod
    def load(cls, path):
        return cls.from_json(read.json_file_as(path, RecordError, cls.WHAT))

    def final_view(self):
        """The view the run ended with: every run heard again, at once."""
        view = self.empty_view()
        for run, same in self.runs:
            view.hear(News("run", lane=run.lane, run=run, same=same))
        return self.ended(view)


@dataclass
class ConcurrencyRecord(RecordFile):
    levels: tuple[int, ...]
    lanes: tuple[str, ...]  # plain first
    words: dict = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)
    stopped: bool = False
    FORMAT: ClassVar[str] = CONCURRENCY
    WHAT: ClassVar[str] = "a recorded sweep"
    RUN: ClassVar[type] = LevelRun
    POINTS: ClassVar[str] = "levels"

    @staticmethod
    def of(view: ConcurrencyView, prompts, settings, models: RunModels, wall_s: float, made_with: str):
        """A finished (or stopped) concurrency sweep's view as a record, with the advice for vLLM written from it."""
        kept = RecordFile.kept_of(view, prompts, settings, models, wall_s, made_with)
        return ConcurrencyRecord(view.levels, view.lanes, dict(view.words), dict(view.fixed), view.stopped, **kept)

    def empty_view(self) -> ConcurrencyView:
        """The view before any run: the levels, the lanes and what is known of them."""
        view = ConcurrencyView(self.levels, self.lanes, greedy=float(self.settings.get("temperature", 0)) == 0)
        view.words = dict(self.words)
        view.fixed = dict(self.fixed)
        view.notes = dict(self.notes)
        view.exact = self.models.exact
        return view

    def ended(self, view: ConcurrencyView) -> ConcurrencyView:
        view.hear(News("end", "stopped" if self.stopped else "done", stopped=self.stopped))
        view.advice = list(self.vllm)
        return view

    def points_json(self) -> dict:
        return {"levels": list(self.levels), "lanes": list(self.lanes), "words": self.words, "fixed": self.fixed,
                "stopped": self.stopped}  # fmt: skip

    @staticmethod
    def points_from_json(data: dict, **kept) -> "ConcurrencyRecord":
        fixed = read.mapping(data.get("fixed", {}), "fixed")
        return ConcurrencyRecord(
            levels=read.each(read.integer, data["levels"], "levels", 1),
            lanes=read.each(read.text, data["lanes"], "lanes"),
            words={k: read.text(v, f"words.{k}") for k, v in read.mapping(data.get("words", {}), "words").items()},
            fixed={k: read.maybe(read.integer, v, f"fixed.{k}") for k, v in fixed.items()},
            stopped=read.flag(data.get("stopped", False), "stopped"),
            **kept,
        )


@dataclass
class TrafficRecord(RecordFile):
    rates: tuple[float, ...]
    lanes: tuple[str, ...]  # plain first
    slo: Slo
    rounds: int
    max_rows: int
    prompt_tokens: list[int]  # each prompt's length in the target's tokens, what the simulator reads prefill by
    FORMAT: ClassVar[str] = TRAFFIC
    WHAT: ClassVar[str] = "a recorded traffic run"
    RUN: ClassVar[type] = TrafficRun
    POINTS: ClassVar[str] = "rates"

    @staticmethod
    def of(view: TrafficView, prompts, prompt_tokens, max_rows, settings, models, wall_s, made_with):
        """A finished (or stopped) run's view as a record."""
        kept = RecordFile.kept_of(view, prompts, settings, models, wall_s, made_with)
        return TrafficRecord(view.rates, view.lanes, view.slo, view.rounds, max_rows, list(prompt_tokens), **kept)

    def empty_view(self) -> TrafficView:
        view = TrafficView(self.rates, self.lanes, self.slo, self.rounds)
        view.notes = dict(self.notes)
        return view

    def ended(self, view: TrafficView) -> TrafficView:
        """The view once every run is heard: the simulator checked against each rate and projected around them."""
        schedules = {}
        for run, _ in self.runs:
            schedules.setdefault(run.rate, tuple(t.arrival for t in run.timings))
        lengths = dict(enumerate(self.prompt_tokens))
        held_out(view, lengths, schedules, self.max_rows)
        requests = max(len(arrivals) for arrivals in schedules.values()) if schedules else 0
        if requests:
            project(view, lengths, requests, self.max_rows, self.settings.get("seed", 0))
        view.message = "replayed"
        view.finished = True
        view.advice = list(self.vllm)
        return view

    def points_json(self) -> dict:
        return {
            "rates": list(self.rates),
            "lanes": list(self.lanes),
            "slo": {"ttft_s": self.slo.ttft_s, "tpot_s": self.slo.tpot_s},
            "rounds": self.rounds,
            "max_rows": self.max_rows,
            "prompt_tokens": self.prompt_tokens,
        }

    @staticmethod
    def points_from_json(data: dict, **kept) -> "TrafficRecord":
        prompt_tokens = list(read.each(read.integer, data["prompt_tokens"], "prompt_tokens", 1))
        if len(prompt_tokens) != len(kept["prompts"]) or not kept["prompts"]:
            raise ValueError("prompt_tokens does not give one length per prompt")
        if any(t.prompt >= len(kept["prompts"]) for run, _ in kept["runs"] for t in run.timings):
            raise ValueError("a run asks a prompt the record does not hold")
        slo = read.mapping(data["slo"], "slo")
        return TrafficRecord(
            rates=read.each(read.number, data["rates"], "rates"),
            lanes=read.each(read.text, data["lanes"], "lanes"),
            slo=Slo(read.number(slo["ttft_s"], "slo.ttft_s"), read.number(slo["tpot_s"], "slo.tpot_s")),
            rounds=read.integer(data["rounds"], "rounds", 1),
            max_rows=read.integer(data["max_rows"], "max_rows", 1),
            prompt_tokens=prompt_tokens,
            **kept,
        )


Record = ConcurrencyRecord | TrafficRecord


def kind_of(data) -> type[ConcurrencyRecord] | type[TrafficRecord] | None:
    """Which kind of record parsed JSON names itself (None: neither)."""
    name = data.get("format") if isinstance(data, dict) else None
    name = EARLIER_NAMES.get(name, name) if isinstance(name, str) else None
    return {CONCURRENCY: ConcurrencyRecord, TRAFFIC: TrafficRecord}.get(name)


def replay(
    record: Record,
    speed: float = 1.0,
    stopped: Callable[[], bool] = lambda: False,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[ConcurrencyView | TrafficView]:
    """The run again: each run appears after its own duration (divided by `speed`; 0: at once), a view after each;
    the last one final."""
    view = record.empty_view()
    for run, same in record.runs:
        if stopped():
            view.hear(News("end", "replay stopped: the runs shown so far stay", stopped=True))
            yield view
            return
        view.hear(News("message", f"replaying {run.words()}"))
        yield view
        if speed > 0:
            sleep(run.duration_s / speed)
        view.hear(News("run", lane=run.lane, run=run, same=same))
        yield view
    yield record.ended(view)
