"""A handoff: one drafter as specviz ran it (`Ran`), written as the setting of each serving engine (`EngineSetting`),
and how a trace records it (its `extra`) and reads it back."""

from dataclasses import asdict, dataclass, field

from ..settings import Settings
from .declaration import Serving


@dataclass(frozen=True)
class EngineSetting:
    engine: str  # one of engine_settings.ENGINES
    kind: str  # "python" (a snippet), "json" (vLLM's --speculative-config object), "flags" (a command line's)
    text: str  # "" where the engine has nothing near
    nearest: str = ""  # "" when it runs specviz's drafter as specviz ran it; else what this setting gives up


KEYS = ("engine", "kind", "text", "nearest")


@dataclass(frozen=True)
class Handoff:
    """One drafter's settings for every engine."""

    name: str  # the lane as specviz names it ("draft", "draft@4")
    drafter: str
    settings: tuple[EngineSetting, ...]
    ran_on: str = ""  # the runtime specviz ran it on, and which engine below (if any) is that runtime, in words

    def to_json(self) -> dict:
        engines = [asdict(s) for s in self.settings]
        return {"name": self.name, "drafter": self.drafter, "engines": engines, "ran_on": self.ran_on}

    @staticmethod
    def from_json(data: dict) -> "Handoff":
        listed = data.get("engines")
        engines = tuple(
            EngineSetting(**{k: str(e.get(k, "")) for k in KEYS})
            for e in (listed if isinstance(listed, list) else ())
            if isinstance(e, dict)
        )
        return Handoff(str(data.get("name", "")), str(data.get("drafter", "")), engines, str(data.get("ran_on", "")))


@dataclass(frozen=True)
class Ran:
    """What specviz ran: the drafter (its kind's name, and what the kind declares it is in the engines: the registry's
    `kind(name).serving`), its settings and options, the models as they are loaded elsewhere (a Hub id or a folder),
    and, where a concurrency sweep measured one, vLLM's draft length per range of batch sizes."""

    drafter: str
    settings: Settings
    options: object = None  # the kind's own Options; None: its defaults
    target: str = "TARGET"
    draft: str = ""
    prompt: str = "Write a Python function that reverses a string."
    chat: bool = True
    same_vocab: bool = True
    per_batch_size: tuple = ()  # ([first, last, γ], ...) from a concurrency sweep
    name: str = ""  # the lane's name, where it is not the drafter's
    serving: Serving = field(kw_only=True)
    runtime: str = field(default="", kw_only=True)  # the runtime specviz ran it on ("": not said)
    runtime_engine: str = field(default="", kw_only=True)  # the serving engine that runtime is ("": none is)


def recording(handoffs) -> dict:
    """What a trace's `extra` carries of its handoffs (read back by `recorded`)."""
    return {"production": [h.to_json() for h in handoffs]}


def recorded(extra: dict) -> tuple[Handoff, ...]:
    """The handoffs a trace recorded (its `extra`), skipping what is not one (a trace from before, or edited)."""
    found = extra.get("production") if isinstance(extra, dict) else None
    return tuple(Handoff.from_json(h) for h in found if isinstance(h, dict)) if isinstance(found, list) else ()
