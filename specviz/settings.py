"""Generation settings, validated once: the engine, CLI and UI all share these limits."""

import math
from dataclasses import dataclass

from .errors import InvalidRequest

MAX_NEW_TOKENS = 4096  # documented cap; also bounded by the model's context
MAX_GAMMA = 32
MAX_SEED = 2**32 - 1  # torch's CPU generator keeps a seed's low 32 bits only: 5 and 2**32 + 5 would give one run
# How drafted tokens are accepted when sampling (temperature 0 is always the exact greedy rule):
# lossless keeps the target's distribution; typical (Medusa's) accepts any plausible token, lossy by design;
# greedy insists on temperature 0.
ACCEPTANCE_MODES = ("greedy", "lossless", "typical")
AUTO = "auto"  # a target precision: the one measured best for the pair on the device (models/precision_choice.py)


@dataclass(frozen=True)
class Settings:
    max_new_tokens: int = 128
    gamma: int = 4  # draft length: tokens proposed per verification step
    temperature: float = 0.0  # 0 means greedy
    top_k: int = 0  # 0 disables top-k
    top_p: float = 1.0  # 1 disables top-p
    seed: int = 0
    adaptive: bool = False  # choose γ per step (up to `gamma`) from the measured acceptance and costs
    acceptance: str = "lossless"  # one of ACCEPTANCE_MODES

    def __post_init__(self):
        if not isinstance(self.max_new_tokens, int) or not 1 <= self.max_new_tokens <= MAX_NEW_TOKENS:
            raise InvalidRequest(
                f"max new tokens must be an integer in 1..{MAX_NEW_TOKENS}, got {self.max_new_tokens!r}"
            )
        if not isinstance(self.gamma, int) or not 1 <= self.gamma <= MAX_GAMMA:
            raise InvalidRequest(f"gamma (draft length) must be an integer in 1..{MAX_GAMMA}, got {self.gamma!r}")
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise InvalidRequest(f"temperature must be a finite number >= 0, got {self.temperature!r}")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise InvalidRequest(f"top-k must be an integer >= 0 (0 disables it), got {self.top_k!r}")
        if not (0 < self.top_p <= 1):  # also rejects NaN
            raise InvalidRequest(f"top-p must be in (0, 1], got {self.top_p!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED:
            raise InvalidRequest(
                f"seed must be an integer in 0..{MAX_SEED} (2**32 - 1: on a CPU torch keeps only the low "
                f"32 bits of a seed), got {self.seed!r}"
            )
        if not isinstance(self.adaptive, bool):
            raise InvalidRequest(f"adaptive must be true or false, got {self.adaptive!r}")
        if self.acceptance not in ACCEPTANCE_MODES:
            raise InvalidRequest(f"acceptance must be one of {', '.join(ACCEPTANCE_MODES)}, got {self.acceptance!r}")
        if self.acceptance == "greedy" and self.temperature != 0:
            raise InvalidRequest("greedy acceptance needs temperature 0; use lossless or typical for sampling")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def lossy(self) -> bool:
        """Typical acceptance while sampling: the output no longer follows the target's distribution."""
        return self.acceptance == "typical" and not self.greedy


def draft_length(text: str) -> tuple[int, bool] | None:
    """A lane's draft length as written after its @: "G", a fixed γ, or "aG", adaptive γ up to G: (G, adaptive);
    None for anything else (digits in ASCII only: "²".isdigit(), yet int() refuses it)."""
    adaptive = text[:1] in ("a", "A")
    digits = text[1:] if adaptive else text
    return (int(digits), adaptive) if digits.isascii() and digits.isdigit() else None


@dataclass(frozen=True)
class LaneName:
    """A lane as it is written: a drafter's name and, after an @, a draft length (fixed, or adaptive up to G) or
    "table" (γ by batch size as measured). Its str is the lane's name as every screen and record writes it."""

    drafter: str
    gamma: int | None = None  # None: no draft length written (the drafter's own best, or the run's settings)
    adaptive: bool = False
    table: bool = False

    def __str__(self) -> str:
        if self.table:
            return f"{self.drafter}@table"
        return self.drafter if self.gamma is None else f"{self.drafter}@{'a' * self.adaptive}{self.gamma}"


def parse_lane(text: str) -> LaneName:
    """`NAME`, `NAME@G`, `NAME@aG` or `NAME@table` read into a LaneName: the one place a lane's @ is read. Anything
    else after the @ is refused in one line; the drafter's name is checked by whoever looks it up."""
    name, _, after = text.strip().partition("@")
    name = name.strip()
    after = after.strip()
    if not after:
        return LaneName(name)
    if after.lower() == "table":
        return LaneName(name, table=True)
    written = draft_length(after)
    if written is None:
        raise InvalidRequest(
            f"lane {text.strip()!r}: after @ comes a draft length, a fixed γ (draft@4) or an adaptive one (draft@a8)"
        )
    return LaneName(name, *written)


def drafter_of(lane: str) -> str:
    """The drafter a lane's name runs ("draft@4" -> "draft")."""
    return parse_lane(lane).drafter


def check_prompt(text: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidRequest("the prompt is empty")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: half of a character, which no tokenizer can take
        raise InvalidRequest(
            f"the prompt is not valid text: {text[exc.start]!r} at character {exc.start} is half of "
            "a character (a lone surrogate)"
        ) from None
    return text


def mode_text(drafter_words: str, settings: Settings) -> str:
    """How the speculative side drafts and verifies, in words for the screen."""
    text = drafter_words + (f", adaptive γ ≤ {settings.gamma}" if settings.adaptive else "")
    if settings.adaptive and not settings.greedy:  # γ follows the clock, and the draws follow γ
        text += (
            " (chosen from measured timings, so the same seed need not repeat a sampled run's text; every run "
            "still follows the target's distribution)"
        )
    if settings.acceptance == "typical":
        return (
            text + "; typical acceptance: LOSSY by design when sampling (it accepts any plausible token, so "
            "the output no longer follows the target's distribution); at temperature 0 it is exact"
        )
    if settings.acceptance == "greedy":
        return text + "; greedy acceptance: exact, the target's own argmax at every position"
    return text + "; lossless: the rejection rule keeps the target's own distribution"
