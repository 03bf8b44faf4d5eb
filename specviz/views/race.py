"""The honest race: plain and speculative decoding take turns on one device, each timed by its own clock.

At every turn the side whose own clock (prefill + its steps, nothing else) is behind runs one step, so the
two never run at the same instant, each side's speed is its own, and at any moment both sides show
what they had produced by the same own-clock time. Pure Python: the sides are iterators of StepEvents.
"""

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields

from ..errors import InvalidRequest
from ..events import StepEvent, generated_ids
from ..settings import Settings, check_prompt
from ..trace import Divergence, Trace

SPEC = "speculative"


@dataclass(frozen=True)
class RaceRequest:
    """One run as the user asked for it, before validation (values may come from a browser or the API)."""

    pair: str
    drafter: str
    dtype: str
    prompt: str
    gamma: object = 4
    max_new_tokens: object = 128
    temperature: object = 0.0
    top_k: object = 0
    top_p: object = 1.0
    seed: object = 0
    adaptive: object = False  # choose γ per step, up to `gamma`
    acceptance: str = "lossless"  # how a sampled step accepts drafts (settings.ACCEPTANCE_MODES)
    draft_dtype: str = "same"  # the draft model's precision: "same" as the target's, or a precision of its own
    exact: object = True  # exact mode where it holds (models/exact.py): each token computed as plain decoding does
    options: Mapping = field(default_factory=dict)  # drafter options by name; the chosen drafter's kind reads its own

    @classmethod
    def of(cls, **values) -> "RaceRequest":
        """From named values as the screen and the API send them: the general fields, and every drafter option."""
        general = {f.name for f in fields(cls)} - {"options"}
        return cls(
            **{k: v for k, v in values.items() if k in general},
            options={k: v for k, v in values.items() if k not in general},
        )

    def settings(self) -> Settings:
        check_prompt(self.prompt)
        return Settings(
            max_new_tokens=_integer(self.max_new_tokens, "max new tokens"),
            gamma=_integer(self.gamma, "gamma"),
            temperature=_number(self.temperature, "temperature"),
            top_k=_integer(self.top_k, "top-k"),
            top_p=_number(self.top_p, "top-p"),
            seed=_integer(self.seed, "seed"),
            adaptive=_flag(self.adaptive, "adaptive"),
            acceptance=self.acceptance,
        )


def _flag(value, name: str) -> bool:
    if isinstance(value, bool):
        return value
    raise InvalidRequest(f"{name} must be true or false, got {value!r}")


def exact_wanted(request: RaceRequest) -> bool:
    return _flag(request.exact, "exact")


def _number(value, name: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InvalidRequest(f"{name} must be a number, got {value!r}") from None


def _integer(value, name: str) -> int:
    """An integer as given (never through a float, which would round 2**53 + 1 to 2**53), or a whole float or text."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value)
    number = _number(value, name)
    if not number.is_integer():
        raise InvalidRequest(f"{name} must be a whole number, got {value!r}")
    return int(number)


@dataclass
class Lane:
    name: str
    events: list[StepEvent] = field(default_factory=list)
    clock_s: float = 0.0  # own time: prefill + steps
    done: bool = False

    @property
    def tokens(self) -> list[int]:
        return generated_ids(self.events)

    def add(self, event: StepEvent) -> None:
        """One more step: its time joins this side's own clock; a step that finished the run ends the lane."""
        self.events.append(event)
        self.clock_s += event.prefill_s + event.step_s
        self.done = event.finish is not None


@dataclass(kw_only=True)
class RaceView:
    """Everything the screen shows of a run; the backend updates one view in place and yields it after each step."""

    plain: Lane
    spec: Lane
    text_of: Callable[[int], str]
    greedy: bool
    message: str = ""
    finished: bool = False
    stopped: bool = False
    divergence: Divergence | None = None
    wall_s: float = 0.0
    mode: str = ""  # how the speculative side drafts and verifies (mode_text)
    lossy: bool = False  # typical acceptance while sampling: no distribution guarantee
    exact: str = ""  # whether the target ran in exact mode, in one line (trace.EXACT_ON when it did)
    trace: Trace | None = None  # the finished run, recorded


def interleave(
    sides: dict[str, Iterator[StepEvent]], lanes: dict[str, Lane], stopped: Callable[[], bool] = lambda: False
) -> Iterator[str]:
    """Advance whichever unfinished lane has the smaller own clock by one step; yield that lane's name."""
    while not stopped():
        running = [name for name in sides if not lanes[name].done]
        if not running:
            return
        name = min(running, key=lambda n: lanes[n].clock_s)
        event = next(sides[name], None)
        if event is None:
            lanes[name].done = True
            continue
        lanes[name].add(event)
        yield name
