"""A run as a visitor or the API asks for it, and the checks of its general fields: pure Python, read once at the
app's edge. A drafter's own options are its kind's to read (drafters/kinds.py); which pair and drafter the app can
run is the app's to say (app/device_calls.check_request)."""

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from .errors import InvalidRequest
from .settings import Settings, check_prompt


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

    def exact_wanted(self) -> bool:
        """Whether the request asks for exact mode (where it holds)."""
        return _flag(self.exact, "exact")

    def settings(self) -> Settings:
        """The generation settings asked for, each field read and checked (the prompt too)."""
        settings = Settings(
            max_new_tokens=_integer(self.max_new_tokens, "max new tokens"),
            gamma=_integer(self.gamma, "gamma"),
            temperature=_number(self.temperature, "temperature"),
            top_k=_integer(self.top_k, "top-k"),
            top_p=_number(self.top_p, "top-p"),
            seed=_integer(self.seed, "seed"),
            adaptive=_flag(self.adaptive, "adaptive"),
            acceptance=self.acceptance,
        )
        check_prompt(self.prompt)
        return settings


def _flag(value, name: str) -> bool:
    if isinstance(value, bool):
        return value
    raise InvalidRequest(f"{name} must be true or false, got {value!r}")


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
