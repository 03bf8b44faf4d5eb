"""How a drafter kind declares itself to the registry: its name and label, an options dataclass that validates
itself, what it needs loaded, and how to build a drafter for one generation. The CLI's flags, the app's menu and
option panels, the race request and the benchmark's methods are all read from these declarations.

What a drafter needs from the target (its hidden state) and how many tree nodes it sends for a given γ are
answered by the drafter itself (engine/step.py), since the engine sees drafters, not kinds. No torch here.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

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


@dataclass(frozen=True)
class Options:
    """Base of every kind's options: each field made with option() is checked on construction."""

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


@dataclass(frozen=True)
class DraftContext:
    """What a drafter is built from, once per generation."""

    target: Any  # LoadedModel
    settings: Any  # Settings
    generator: Any  # the torch.Generator the verification draws from too
    draft: Any = None  # the draft LoadedModel, for a kind that needs one
    memory: Any = None  # the caller's RunMemory (suffix_index.py), for a kind that drafts from earlier runs


@dataclass(frozen=True)
class FamilyBest:
    """A prompt family the benchmark measured a drafter fastest on, and the settings it won with there."""

    family: str  # a kind of assets/prompts.json
    gamma: int
    adaptive: bool


@dataclass(frozen=True)
class DrafterKind:
    name: str  # what users pick: --drafter NAME, the API's drafter value, the benchmark's method
    label: str  # the app's menu entry
    summary: str  # one line: how it drafts
    build: Callable[[Any, DraftContext], Any]  # (its options, the context) -> a Drafter for one generation
    options: type = Options  # its Options dataclass
    needs_draft: bool = False  # a second model beside the target (the pair's draft, or --draft), at least sometimes
    draft_if: Callable[[Any], bool] | None = None  # (its options) -> whether they need it; None: always
    precheck: Callable[[Any, str], None] | None = None  # (options, target name): refuse before any model loads
    describe: Callable[[Any], str] | None = None  # its words on screen, given the options (default: the label)
    order: int = 100  # position in menus
    menu: bool = True  # offered by the CLI and the app; False: a measuring tool of the benchmark only
    remembers: bool = False  # drafts from the caller's earlier runs (DraftContext.memory), so run order matters
    # what the benchmark measured fastest for it, used where a caller gives nothing (the CLI, the app's first screen):
    # (name, value) pairs of settings (gamma, adaptive) and of its own options; the library's defaults stay plain
    preferred: tuple = ()
    counterpart: str | None = None  # transformers' own method that does what it does, raced against it in the bench
    lookup: bool = False  # copies drafts from earlier text (the prompt, this output, earlier runs), at least sometimes
    # a measuring tool accepted at a rate it is given (its options `reference` and `alpha`): run once per rate, greedy
    sets_alpha: bool = False
    best_for: tuple[FamilyBest, ...] = ()  # the prompt families it was measured fastest on (the app's examples)

    def prefers(self, name: str, default=None):
        return dict(self.preferred).get(name, default)

    def parse(self, values: Mapping | None) -> Options:
        return values if isinstance(values, self.options) else self.options.parse(values or {})

    def draft_needed(self, options: Options) -> bool:
        """Whether a run with these options drafts with a second model."""
        return self.needs_draft and (self.draft_if is None or self.draft_if(options))

    def words(self, options: Options) -> str:
        return self.describe(options) if self.describe else self.label

    def check_for(self, options: Options, target_name: str) -> None:
        if self.precheck is not None:
            self.precheck(options, target_name)
