"""A recorded run: the settings, the models, the prompt, every step of every side with its timings, and the text of
every token that appears, as one JSON file. It replays on screen and becomes a snapshot page with no model loaded.
Pure Python, like the events it holds."""

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from .errors import SpecvizError
from .events import PLAIN, StepEvent, generated_ids

FORMAT = "specviz-trace"
VERSION = 1
EXACT_ON = "exact mode"  # a run's models["exact"] when the target computed each token as one-token decoding does


EXACT_ADVICE = (
    "Exact mode (on by default for a bfloat16 target on a CPU) computes every token as plain decoding does, so no near "
    "tie can part the two there."
)


def identity_grounds(exact: str) -> str:
    """What a greedy run's identity with plain decoding rests on, from its models["exact"] line."""
    if exact == EXACT_ON:
        return "bit for bit by construction: in exact mode the target computes every token as one-token decoding does"
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

    @staticmethod
    def from_json(data: dict) -> "RunModels":
        """Read leniently: a trace from before a field existed lacks it, and a field specviz no longer knows is
        dropped."""
        return RunModels(**{f.name: str(data[f.name]) for f in fields(RunModels) if data.get(f.name) is not None})


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
            raise TraceError(f"the trace's version is {version!r}, not a whole number")
        if version > VERSION:
            raise TraceError(
                f"this trace is version {version}, written by a newer specviz; this one reads version "
                f"{VERSION} and older"
            )
        try:
            sides = [
                Side(
                    s["name"],
                    s["words"],
                    [StepEvent.from_json(e) for e in s["events"]],
                    _divergence(s.get("divergence")),
                )
                for s in data["sides"]
            ]
            if not sides or sides[0].name != PLAIN:
                raise ValueError("its first side is not plain decoding")
            return Trace(
                kind=data["kind"],
                created=data["created"],
                prompt=data["prompt"],
                prompt_tokens=int(data["prompt_tokens"]),
                settings=dict(data["settings"]),
                models=RunModels.from_json(dict(data["models"])),
                sides=sides,
                texts={int(k): str(v) for k, v in data["texts"].items()},
                wall_s=float(data.get("wall_s", 0.0)),
                stopped=bool(data.get("stopped", False)),
                made_with=str(data.get("made_with", "")),
                extra=dict(data.get("extra", {})),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceError(f"the trace is damaged ({type(exc).__name__}: {str(exc)[:120]})") from None

    @staticmethod
    def load(path) -> "Trace":
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise TraceError(f"cannot read a trace from {Path(path).name}: {str(exc)[:120]}") from None
        return Trace.from_json(data)


def _divergence(data) -> Divergence | None:
    if data is None:
        return None
    return Divergence(
        int(data["position"]),
        str(data["plain_token"]),
        str(data["spec_token"]),
        tuple((str(t), float(p)) for t, p in data["top"]),
    )
