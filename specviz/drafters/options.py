"""A drafter kind's options: each a dataclass field that states its range and help, and checks itself. The CLI's
flags, the app's option panels and API parameters, and every request's checks are read from these declarations. No
torch here."""

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, dataclass_transform

from ..errors import InvalidRequest


@dataclass(frozen=True)
class OptionSpec:
    """One option as the CLI and the app ask for it, and the values it takes."""

    label: str  # in error messages and on screen
    help: str
    low: int | None = None  # with high: an integer in low..high
    high: int | None = None
    choices: tuple = ()  # the values offered; with strict, the only ones accepted
    strict: bool = True
    flag: str | None = None  # the CLI flag; None: --name-with-dashes
    app: bool = True  # on the app's option panel (False: the model pair supplies it, or nobody types it)
    cli: bool = True  # a CLI flag
    pair_model: bool = False  # where a model it loads is found (heads for the target): a model pair can bring it
    published: tuple = ()  # with pair_model: (Hub target, its published model) pairs, which a preset pair brings
    name: str = ""  # the field's name, filled in by Options.specs()
    default: Any = None

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def integer(self) -> bool:
        return self.low is not None

    def coerce(self, value):
        """A value from a browser, the API or a command line, in this option's own type."""
        if not self.integer:
            return value
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InvalidRequest(f"{self.label} must be a number, got {value!r}") from None
        if isinstance(value, bool) or not number.is_integer():
            raise InvalidRequest(f"{self.label} must be a whole number, got {value!r}")
        return int(number)

    def check(self, value) -> None:
        if self.integer and (
            not isinstance(value, int) or isinstance(value, bool) or not self.low <= value <= self.high
        ):
            raise InvalidRequest(f"{self.label} must be an integer in {self.low}..{self.high}, got {value!r}")
        if self.choices and self.strict and value not in self.choices:
            words = " or ".join(self.choices) if len(self.choices) == 2 else "one of " + ", ".join(self.choices)
            raise InvalidRequest(f"{self.label} must be {words}, got {value!r}")


def option(default, label: str, help: str, **how) -> Any:
    """A field of an Options dataclass: its default, and how to ask for it (see OptionSpec)."""
    return field(default=default, metadata={"option": OptionSpec(label, help, **how)})


def shared_option(owner: type, name: str) -> Any:
    """Another kind's option, declared again as the same option: one flag, one value for both (an option the
    screen does not show, such as where heads are found, which a model pair can then bring for both)."""
    declared = owner.__dataclass_fields__[name]
    return field(default=declared.default, metadata=declared.metadata)


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
@dataclass(frozen=True)
class Options:
    """Base of every kind's options: each field made with option() is checked on construction. A subclass is a
    frozen dataclass without saying so (the base makes it one as it is defined)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        dataclass(frozen=True)(cls)

    def __post_init__(self):
        for spec in self.specs():
            spec.check(getattr(self, spec.name))
        self.check()

    def check(self) -> None:
        """Checks beyond one option's range or choices (override where needed)."""

    @classmethod
    def specs(cls) -> tuple[OptionSpec, ...]:
        return tuple(
            replace(f.metadata["option"], name=f.name, default=f.default) for f in fields(cls) if "option" in f.metadata
        )

    @classmethod
    def parse(cls, values: Mapping) -> "Options":
        """This kind's options from values that may hold other kinds' options too (missing or None: the default)."""
        return cls(**{s.name: s.coerce(values[s.name]) for s in cls.specs() if values.get(s.name) is not None})
