"""A run as a visitor or the API asks for it, read and checked once, at the server's edge, into the one form the
device runs: `Request`. The screen and the API hand in named values (from a browser: numbers as text, floats for
integers); `read_request` checks every one of them (the settings, the precisions, the pair, the drafter and every
drafter option on the screen) before a model loads, and nothing after it checks them again.

A Request is plain data (Settings, an Options dataclass, strings): under ZeroGPU it is pickled into the GPU worker."""

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

from ..drafters.options import Options
from ..drafters.registry import NO_DRAFTER, kind, kinds
from ..errors import InvalidRequest
from ..models.loading import DTYPES
from ..settings import AUTO, Settings, check_prompt, mode_text
from ..workload.entrants import EntryRules

# The named values a run takes besides drafter options; the screen calls the token budget max_new.
NO_TABLE = "run a Concurrency sweep first: the lane follows the table of γ by batch size it measured"
_GENERAL = ("pair", "drafter", "dtype", "prompt", "gamma", "max_new_tokens", "temperature", "top_k", "top_p", "seed")
_GENERAL += ("adaptive", "acceptance", "draft_dtype", "exact", "runtime")


@dataclass(frozen=True)
class Request:
    """A run as the server checked it: the pair's label, the prompt, the settings, the drafter (NO_DRAFTER: plain
    decoding) with its options (and what the pair brings), and how its models run."""

    pair: str
    prompt: str
    settings: Settings
    drafter: str = NO_DRAFTER
    options: Options | None = None
    given: Mapping = field(default_factory=dict)  # every drafter option as asked (each kind's checked), with what
    # the pair brings: a Grand Prix's or a workload's lanes read their own from it
    exact: bool = True  # exact mode where it holds (models/exact.py): each token computed as plain decoding does
    dtype: str = "bfloat16"  # the target's precision
    draft_dtype: str = ""  # the draft's, where it is not the target's
    runtime: str = AUTO  # what computes the models: a runtime's name, or auto (measured here)
    remembers: bool = False  # the drafter drafts from the visitor's earlier runs
    mode: str = ""  # how the drafter's side drafts and verifies, in words (settings.mode_text)

    def plain(self) -> "Request":
        return replace(self, drafter=NO_DRAFTER, options=None, remembers=False, mode="")

    def options_for(self, drafter_kind) -> Options:
        """A lane's options: its kind's own, read from what was asked (checked already by read_request)."""
        return drafter_kind.parse(self.given)


def read_request(values: Mapping, shelf, session: str | None = None) -> Request:
    """The one check of a run's values: the settings, exact mode, the precisions, every option on the screen
    (whichever drafter runs), the pair (one this `session` may ask for: a preset or its own) and the drafter with its
    options (and what the pair brings, such as its Medusa heads), and whether it has what it needs for the pair's
    target. Drafter 'none' (or none named) asks for plain decoding alone. `max_new` is read as `max_new_tokens`."""
    values = dict(values)
    if "max_new" in values:
        values["max_new_tokens"] = values.pop("max_new")
    given = {k: v for k, v in values.items() if k not in _GENERAL}
    preset = shelf.preset(values.get("pair"), session)
    for other in kinds(menu_only=True):
        other.parse(given)
    given = {**given, **dict(preset.options)}
    drafter = NO_DRAFTER
    options = None
    remembers = False
    words = ""
    runtime = values.get("runtime", shelf.runtimes[0])  # none named: the one the app's choice starts at
    if runtime not in shelf.runtimes:
        raise InvalidRequest(f"runtime must be one of {', '.join(shelf.runtimes)}, got {runtime!r}")
    name = values.get("drafter", NO_DRAFTER)
    if name != NO_DRAFTER:
        chosen = kind(name)
        if not chosen.listing.menu:  # the benchmark's measuring tools are not raced
            raise InvalidRequest(f"unknown drafter {name!r}")
        drafter = chosen.name
        options = chosen.parse(given)
        chosen.check_for(options, preset.target, shelf.runtime_named(runtime))
        remembers = chosen.remembers
        words = chosen.listing.words(options)
    dtype = values.get("dtype", "bfloat16")
    draft_dtype = values.get("draft_dtype", "same")
    for precision, other in ((dtype, AUTO), (draft_dtype, "same")):
        if not isinstance(precision, str) or (precision not in DTYPES and precision != other):
            raise InvalidRequest(f"precision must be one of {', '.join([other, *DTYPES])}, got {precision!r}")
    exact = _flag(values.get("exact", True), "exact")
    settings = settings_of(values)
    prompt = check_prompt(values.get("prompt"))
    return Request(
        pair=preset.label,
        prompt=prompt,
        settings=settings,
        drafter=drafter,
        options=options,
        given=given,
        exact=exact,
        dtype=dtype,
        draft_dtype="" if draft_dtype == "same" else draft_dtype,
        runtime=runtime,
        remembers=remembers,
        mode=mode_text(words, settings) if words else "",
    )


def settings_of(values: Mapping) -> Settings:
    """The generation settings in `values` (missing: Settings' defaults), each read as the screen and the API send
    it and checked."""
    read = {"max_new_tokens": _integer, "gamma": _integer, "temperature": _number, "top_k": _integer}
    read |= {"top_p": _number, "seed": _integer, "adaptive": _flag}
    words = {"max_new_tokens": "max new tokens", "top_k": "top-k", "top_p": "top-p"}
    chosen = {name: how(values[name], words.get(name, name)) for name, how in read.items() if name in values}
    defaults = {f.name: f.default for f in fields(Settings)}
    return Settings(**{**defaults, **chosen, "acceptance": values.get("acceptance", defaults["acceptance"])})


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


def entry_rules(asked: Request, preset, tables: dict | None = None) -> EntryRules:
    """Each entrant read with the request's options, checked against the preset's target and draft; NAME@table
    lanes from `tables` (the visitor's last Concurrency sweep of the pair; None where no table lane runs)."""
    return EntryRules(asked.options_for, preset.target, bool(preset.draft), tables, NO_TABLE, asked.runtime)
