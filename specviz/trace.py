"""A recorded run: the settings, the models, the prompt, every step of every side with its timings, and the text of
every token that appears, as one JSON file. It replays on screen and becomes a snapshot page with no model loaded.
Pure Python, like the events it holds."""

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from . import reading as read
from .errors import SpecvizError
from .events import PLAIN, StepEvent, generated_ids
from .settings import Settings

FORMAT = "specviz-trace"
VERSION = 1
EXACT_ON = "exact mode"  # a run's models["exact"] when the target computed each token as one-token decoding does


EXACT_ADVICE = (
    "Exact mode (on by default for a bfloat16 target on a CPU) computes every token as plain decoding does, so no near "
    "tie can part the two there."
)
NO_EXACT_MODE = " has no exact mode: "  # in a runtime's exact-mode line: "exact mode off: NAME has no exact mode: why"
ELSEWHERE_ADVICE = "A runtime that has an exact mode (the Runtime choice) computes every token as plain decoding does."


def identity_grounds(exact: str) -> str:
    """What a greedy run's identity with plain decoding rests on, from its models["exact"] line."""
    if exact == EXACT_ON:
        return "bit for bit by construction: in exact mode the target computes every token as one-token decoding does"
    if NO_EXACT_MODE in exact:  # the runtime's own words: which kernels round otherwise, and why no mode holds there
        return exact.removeprefix("exact mode off: ")
    return (
        "in bfloat16 (or int8) a forward over several tokens rounds otherwise than a forward over one, so a near "
        "tie can tip either way" + (f" ({exact})" if exact else "")
    )


class TraceError(SpecvizError):
    """A file that is not a trace, is damaged, or comes from a newer specviz."""


@dataclass(frozen=True)
class Divergence:
    """Where greedy speculative output first differs from plain, and how close the target's call was there."""

    position: int  # index into the generated tokens
    plain_token: str
    spec_token: str
    top: tuple[tuple[str, float], ...]  # the target's two most likely tokens there, (text, probability)


@dataclass
class RunModels:
    """The models a run used, as a trace, a snapshot and a report name them. Every field is text; "" is unknown."""

    target: str = ""
    draft: str = ""
    pair: str = ""  # the two as the screen labels them
    precision: str = ""
    draft_precision: str = ""  # "" where the draft has the target's, or there is no draft
    device: str = ""
    exact: str = ""  # EXACT_ON, or why exact mode did not hold (filled in once the target has run)
    runtime: str = ""  # what computed the models: transformers, llama.cpp ("": a trace from before it was said)

    @staticmethod
    def from_json(data: dict) -> "RunModels":
        """Read leniently: a trace from before a field existed lacks it, and a field specviz no longer knows is
        dropped."""
        known = [f.name for f in fields(RunModels) if data.get(f.name) is not None]
        return RunModels(**{name: read.text(data[name], f"models.{name}") for name in known})


@dataclass
class Side:
    name: str  # PLAIN, or the drafter's name
    words: str  # how it drafted and verified, as the screen said it ("" for plain decoding)
    events: list[StepEvent]
    divergence: Divergence | None = None  # greedy: where it first parted from plain decoding, if it did

    @property
    def tokens(self) -> list[int]:
        return generated_ids(self.events)


@dataclass(kw_only=True)
class Trace:
    kind: str  # "race" (plain and one drafter) or "comparison" (plain and every drafter)
    created: str  # when it was recorded, ISO 8601
    prompt: str
    prompt_tokens: int
    settings: dict  # specviz.settings.Settings as a dict
    models: RunModels
    sides: list[Side]  # plain decoding first (`plain`), then the drafters (`drafted`)
    texts: dict[int, str]  # every token id that appears anywhere in the sides, as its text
    wall_s: float = 0.0
    stopped: bool = False
    made_with: str = ""  # the command, or "the app"
    extra: dict = field(default_factory=dict)

    @property
    def greedy(self) -> bool:
        return float(self.settings.get("temperature", 0)) == 0

    @property
    def lossy(self) -> bool:
        return self.settings.get("acceptance") == "typical" and not self.greedy

    def text_of(self, token: int) -> str:
        return self.texts.get(token, f"<{token}>")

    def side(self, name: str) -> Side:
        return next(s for s in self.sides if s.name == name)

    @property
    def plain(self) -> Side:
        return self.sides[0]

    @property
    def drafted(self) -> list[Side]:
        """The drafters' sides, in the order they ran: one in a race, every drafter in a comparison."""
        return self.sides[1:]

    @property
    def spec(self) -> Side | None:
        """The first drafter's side that ran (a race's only one), or None when the trace holds plain decoding alone."""
        return next((s for s in self.drafted if s.events), next(iter(self.drafted), None))

    def to_json(self) -> dict:
        data = asdict(self)
        data["texts"] = {str(k): v for k, v in self.texts.items()}
        data["sides"] = [{**asdict(s), "events": [e.to_json() for e in s.events]} for s in self.sides]
        return {"format": FORMAT, "version": VERSION, **data}

    def save(self, path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_json(), ensure_ascii=False))
        return path

    @staticmethod
    def from_json(data) -> "Trace":
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise TraceError('not a specviz trace (no "format": "specviz-trace" in it)')
        version = data.get("version")
        if not isinstance(version, int) or version < 1:
            raise TraceError(f"the trace's version is {read.shown(version)}, not a whole number")
        if version > VERSION:
            raise TraceError(
                f"this trace is version {version}, written by a newer specviz; this one reads version "
                f"{VERSION} and older"
            )
        with read.damage_as(TraceError, "the trace"):
            sides = [_side(s, f"sides[{i}]") for i, s in enumerate(read.listed(data["sides"], "sides"))]
            if not sides or sides[0].name != PLAIN:
                raise ValueError("its first side is not plain decoding")
            return Trace(
                kind=_kind(data["kind"]),
                created=read.text(data["created"], "created"),
                prompt=read.text(data["prompt"], "prompt"),
                prompt_tokens=read.integer(data["prompt_tokens"], "prompt_tokens"),
                settings=_settings(data["settings"]),
                models=RunModels.from_json(read.mapping(data["models"], "models")),
                sides=sides,
                texts=_texts(data["texts"]),
                wall_s=read.number(data.get("wall_s", 0.0), "wall_s"),
                stopped=read.flag(data.get("stopped", False), "stopped"),
                made_with=read.text(data.get("made_with", ""), "made_with"),
                extra=_extra(data.get("extra", {})),
            )

    @staticmethod
    def load(path) -> "Trace":
        return Trace.from_json(read.json_file_as(path, TraceError, "a trace"))


def _side(data, what: str) -> Side:
    data = read.mapping(data, what)
    events = read.listed(data["events"], f"{what}.events")
    return Side(
        read.text(data["name"], f"{what}.name"),
        read.text(data["words"], f"{what}.words"),
        [StepEvent.from_json(e) for e in events],
        _divergence(data.get("divergence"), f"{what}.divergence"),
    )


def _divergence(data, what: str) -> Divergence | None:
    if data is None:
        return None
    data = read.mapping(data, what)
    top = read.listed(data["top"], f"{what}.top")
    return Divergence(
        read.integer(data["position"], f"{what}.position"),
        read.text(data["plain_token"], f"{what}.plain_token"),
        read.text(data["spec_token"], f"{what}.spec_token"),
        tuple(
            (read.text(t, f"{what}.top"), read.number(p, f"{what}.top", 0.0, 1.001))
            for t, p in (read.listed(pair, f"{what}.top") for pair in top)
        ),
    )


KINDS = ("race", "comparison", "grand prix")  # a duel; an earlier version's every-drafter run; a Grand Prix


def _kind(value) -> str:
    if value not in KINDS:
        raise ValueError(f"its kind is {str(value)[:40]!r}, not one of {', '.join(KINDS)}")
    return value


def _texts(data) -> dict[int, str]:
    """Each token id's text (JSON keys are strings: the ids written out)."""
    texts = {}
    for key, value in read.mapping(data, "texts").items():
        if not (key.isascii() and key.isdigit() and len(key) < 16):
            raise ValueError(f"texts has a key {key[:20]!r} that is not a token id")
        texts[int(key)] = read.text(value, f"texts[{key}]")
    return texts


def _settings(data) -> dict:
    """The run's settings as recorded, checked as a run's settings are (fields this version does not know are kept
    and left unread)."""
    data = read.mapping(data, "settings")
    known = {f.name for f in fields(Settings)}
    Settings(**{k: v for k, v in data.items() if k in known})
    return dict(data)


def _extra(data) -> dict:
    """A Grand Prix's lanes (name, drafter, words, note, γ, adaptive) and its turn order, checked."""
    data = read.mapping(data, "extra")
    for i, lane in enumerate(read.listed(data.get("lanes", []), "extra.lanes")):
        lane = read.mapping(lane, f"extra.lanes[{i}]")
        for key in ("name", "drafter", "words", "note"):
            read.maybe(read.text, lane.get(key), f"extra.lanes[{i}].{key}")
        read.maybe(read.integer, lane.get("gamma"), f"extra.lanes[{i}].gamma")
        read.maybe(read.flag, lane.get("adaptive"), f"extra.lanes[{i}].adaptive")
    read.each(read.integer, data.get("turns", []), "extra.turns")
    return dict(data)
