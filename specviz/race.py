"""The honest race: plain and speculative decoding take turns on one device, each timed by its own clock.

At every turn the side whose own clock (prefill + its steps, nothing else) is behind runs one step, so the
two never run at the same instant, each side's speed is its own, and at any moment both sides show
what they had produced by the same own-clock time. Pure Python: the sides are iterators of StepEvents.
"""

from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional

from .errors import InvalidRequest
from .events import StepEvent
from .settings import Settings, check_prompt, lookup_options, medusa_options

PLAIN, SPEC = "plain", "speculative"


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
    ngram_max: object = 3  # lookup drafters' options (others ignore them)
    candidates: object = 4
    choice: str = "recent"
    medusa_tree: str = "sparse"  # Medusa's options (the heads come with the pair)
    acceptance: str = "lossless"
    adaptive: object = False  # choose γ per step, up to `gamma`

    def options(self) -> dict:
        return lookup_options(_integer(self.ngram_max, "n-gram size"), _integer(self.candidates, "candidates"),
                              self.choice) | medusa_options(None, self.medusa_tree, self.acceptance,
                                                            _number(self.temperature, "temperature"))

    def mode(self) -> str:
        """How the speculative side verifies, in words for the screen."""
        names = {"draft": "draft model", "ngram": "n-gram prompt lookup", "history": "history lookup (tree)",
                 "medusa": "Medusa heads"}
        text = names.get(self.drafter, str(self.drafter))
        if self.adaptive is True:
            text += f", adaptive γ ≤ {self.gamma}"
        if self.drafter != "medusa":
            return f"{text}; lossless: the rejection rule keeps the target's own distribution"
        text += f", {self.medusa_tree} tree"
        if self.acceptance == "typical":
            return (text + "; typical acceptance: LOSSY by design when sampling (it accepts any plausible token, so "
                    "the output no longer follows the target's distribution); at temperature 0 it is exact")
        if self.acceptance == "greedy":
            return text + "; greedy acceptance: exact, the target's own argmax at every position"
        return text + "; lossless: tree rejection sampling keeps the target's own distribution"

    @property
    def lossy(self) -> bool:
        return self.drafter == "medusa" and self.acceptance == "typical" and _number(self.temperature, "t") > 0

    def settings(self) -> Settings:
        check_prompt(self.prompt)
        return Settings(
            max_new_tokens=_integer(self.max_new_tokens, "max new tokens"), gamma=_integer(self.gamma, "gamma"),
            temperature=_number(self.temperature, "temperature"), top_k=_integer(self.top_k, "top-k"),
            top_p=_number(self.top_p, "top-p"), seed=_integer(self.seed, "seed"), adaptive=_flag(self.adaptive),
        )


def _flag(value) -> bool:
    if isinstance(value, bool):
        return value
    raise InvalidRequest(f"adaptive must be true or false, got {value!r}")


def _number(value, name: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InvalidRequest(f"{name} must be a number, got {value!r}") from None


def _integer(value, name: str) -> int:
    number = _number(value, name)
    if not number.is_integer():
        raise InvalidRequest(f"{name} must be a whole number, got {value!r}")
    return int(number)


@dataclass(frozen=True)
class Divergence:
    """Where greedy speculative output first differs from plain, and how close the target's call was there."""
    position: int  # index into the generated tokens
    plain_token: str
    spec_token: str
    top: tuple[tuple[str, float], ...]  # the target's two most likely tokens there, (text, probability)


@dataclass
class Lane:
    name: str
    events: list[StepEvent] = field(default_factory=list)
    clock_s: float = 0.0  # own time: prefill + steps
    done: bool = False

    @property
    def tokens(self) -> list[int]:
        return [t for e in self.events for t in e.tokens]


@dataclass
class RaceView:
    """Everything the screen shows of a run; the backend updates one view in place and yields it after each step."""
    plain: Lane
    spec: Lane
    text_of: Callable[[int], str]
    greedy: bool
    message: str = ""
    finished: bool = False
    stopped: bool = False
    divergence: Optional[Divergence] = None
    wall_s: float = 0.0
    mode: str = ""  # how the speculative side drafts and verifies (RaceRequest.mode)
    lossy: bool = False  # typical acceptance while sampling: no distribution guarantee


def interleave(sides: dict[str, Iterator[StepEvent]], lanes: dict[str, Lane],
               stopped: Callable[[], bool] = lambda: False) -> Iterator[str]:
    """Advance whichever unfinished lane has the smaller own clock by one step; yield that lane's name."""
    while not stopped():
        running = [name for name in sides if not lanes[name].done]
        if not running:
            return
        name = min(running, key=lambda n: lanes[n].clock_s)
        event = next(sides[name], None)
        lane = lanes[name]
        if event is None:
            lane.done = True
            continue
        lane.events.append(event)
        lane.clock_s += event.prefill_s + event.step_s
        lane.done = event.finish is not None
        yield name
