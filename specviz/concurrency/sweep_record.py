"""A concurrency sweep recorded: its levels, lanes, prompts, settings and models, and every level run of every lane in
the order it ran, as one JSON file. It replays (the runs shown again in turn, at their own pace or faster) and
becomes a snapshot page with no model loaded. Pure Python."""

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .. import reading as read
from ..errors import SpecvizError
from ..serving.batch_table import VllmAdvice
from ..trace import RunModels
from .sweep_results import ConcurrencyNews, LevelRun
from .sweep_view import ConcurrencyView

FORMAT = "specviz-concurrency"
EARLIER_FORMATS = ("specviz-load",)  # what the format was called before: such records still read
VERSION = 1


class ConcurrencyRecordError(SpecvizError):
    """A file that is not a recorded sweep, or one damaged."""


@dataclass
class ConcurrencyRecord:
    levels: tuple[int, ...]
    lanes: tuple[str, ...]  # plain first
    prompts: list[str]
    settings: dict
    models: RunModels
    runs: list[tuple[LevelRun, tuple[bool, ...] | None]]  # in the order they ran, with each row's identity
    words: dict = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)
    notes: dict = field(default_factory=dict)
    created: str = ""
    wall_s: float = 0.0
    stopped: bool = False
    made_with: str = ""
    vllm: tuple[VllmAdvice, ...] = ()  # what the sweep measured, as vLLM's draft lengths (none in older records)

    @staticmethod
    def of(
        view: ConcurrencyView, prompts: list[str], settings, models: RunModels, wall_s: float, made_with: str, vllm=()
    ):
        """A finished (or stopped) sweep's view as a record, with the advice for vLLM written from it."""
        return ConcurrencyRecord(
            levels=view.levels,
            lanes=view.lanes,
            prompts=list(prompts),
            settings=dict(settings.__dict__),
            models=models,
            runs=list(view.order),
            words=dict(view.words),
            fixed=dict(view.fixed),
            notes=dict(view.notes),
            created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            wall_s=wall_s,
            stopped=view.stopped,
            made_with=made_with,
            vllm=tuple(vllm),
        )

    def view(self) -> ConcurrencyView:
        """A view before any run: the levels, the lanes and what is known of them."""
        view = ConcurrencyView(self.levels, self.lanes, greedy=float(self.settings.get("temperature", 0)) == 0)
        view.words, view.fixed, view.notes = dict(self.words), dict(self.fixed), dict(self.notes)
        view.exact = self.models.exact
        return view

    def final_view(self) -> ConcurrencyView:
        *_, view = replay_concurrency(self, speed=0.0)
        return view

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "version": VERSION,
            "created": self.created,
            "levels": list(self.levels),
            "lanes": list(self.lanes),
            "prompts": self.prompts,
            "settings": self.settings,
            "models": self.models.__dict__,
            "words": self.words,
            "fixed": self.fixed,
            "notes": self.notes,
            "runs": [{**run.to_json(), "identical": None if same is None else list(same)} for run, same in self.runs],
            "wall_s": self.wall_s,
            "stopped": self.stopped,
            "made_with": self.made_with,
            "vllm": [advice.__dict__ for advice in self.vllm],
        }

    def save(self, path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_json(), ensure_ascii=False))
        return path

    @staticmethod
    def from_json(data) -> "ConcurrencyRecord":
        if not is_concurrency_record(data):
            raise ConcurrencyRecordError(f'not a recorded sweep (no "format": "{FORMAT}" in it)')
        if data.get("version") != VERSION:
            raise ConcurrencyRecordError(
                f"the sweep's version is {read.shown(data.get('version'))}; this specviz reads 1"
            )
        with read.damage_as(ConcurrencyRecordError, "the recorded sweep"):
            levels = read.each(read.integer, data["levels"], "levels", 1)
            lanes = read.each(read.text, data["lanes"], "lanes")
            runs = []
            for i, item in enumerate(read.listed(data["runs"], "runs")):
                run = LevelRun.from_json(item, f"runs[{i}]")
                if run.lane not in lanes or run.rows not in levels:
                    raise ValueError(f"runs[{i}] is of lane {run.lane!r} at {run.rows} rows, not one the sweep names")
                same = read.maybe(lambda v, w: read.each(read.flag, v, w), item.get("identical"), f"runs[{i}]")
                runs.append((run, same))
            return ConcurrencyRecord(
                levels=levels,
                lanes=lanes,
                prompts=list(read.each(read.text, data["prompts"], "prompts")),
                settings=dict(read.mapping(data["settings"], "settings")),
                models=RunModels.from_json(read.mapping(data["models"], "models")),
                runs=runs,
                words={k: read.text(v, f"words.{k}") for k, v in read.mapping(data.get("words", {}), "words").items()},
                fixed={
                    k: read.maybe(read.integer, v, f"fixed.{k}")
                    for k, v in read.mapping(data.get("fixed", {}), "fixed").items()
                },
                notes={k: read.text(v, f"notes.{k}") for k, v in read.mapping(data.get("notes", {}), "notes").items()},
                created=read.text(data.get("created", ""), "created"),
                wall_s=read.number(data.get("wall_s", 0.0), "wall_s"),
                stopped=read.flag(data.get("stopped", False), "stopped"),
                made_with=read.text(data.get("made_with", ""), "made_with"),
                vllm=VllmAdvice.listed(data.get("vllm", [])),
            )

    @staticmethod
    def load(path) -> "ConcurrencyRecord":
        return ConcurrencyRecord.from_json(read.json_file_as(path, ConcurrencyRecordError, "a recorded sweep"))


def is_concurrency_record(data) -> bool:
    """Whether parsed JSON names itself a recorded sweep."""
    return isinstance(data, dict) and data.get("format") in (FORMAT, *EARLIER_FORMATS)


def replay_concurrency(
    record: ConcurrencyRecord,
    speed: float = 1.0,
    stopped: Callable[[], bool] = lambda: False,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[ConcurrencyView]:
    """The sweep again: each run appears after its own wall time (divided by `speed`; 0: at once), a view after each;
    the last one final."""
    view = record.view()
    for run, same in record.runs:
        if stopped():
            view.hear(ConcurrencyNews("end", "replay stopped: the runs shown so far stay", stopped=True))
            yield view
            return
        view.message = f"replaying {run.lane}: {run.rows} request{'s' * (run.rows > 1)} at once"
        yield view
        if speed > 0:
            sleep(run.wall_s / speed)
        view.hear(ConcurrencyNews("run", lane=run.lane, run=run, same=same))
        yield view
    view.hear(ConcurrencyNews("end", "stopped" if record.stopped else "done", stopped=record.stopped))
    yield view
