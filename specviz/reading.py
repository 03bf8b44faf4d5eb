"""Reading back what specviz wrote (a trace): each value checked for the kind and range it was written with, so a
damaged file fails where it is read, in one line naming the field, never later where it is drawn. Pure Python.

Every reader raises ValueError with the field's name; the caller turns it into its own error."""

import json
import math
from contextlib import contextmanager
from pathlib import Path

LARGEST = 2**53  # no count or id specviz writes comes near it; JSON readers elsewhere lose precision past it


def shown(value) -> str:
    """A value as an error message quotes it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def integer(value, what: str, low: int = 0, high: int = LARGEST) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{what} is {shown(value)}, not a whole number in {low}..{high}")
    return value


def number(value, what: str, low: float = 0.0, high: float = math.inf) -> float:
    """A finite number in [low, high] (an integer is taken as one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ValueError(f"{what} is {shown(value)}, not a number in {low}..{high}")
    if not math.isfinite(value):
        raise ValueError(f"{what} is {shown(value)}, not a finite number")
    return float(value)


def text(value, what: str) -> str:
    """A string that is Unicode text throughout (a lone surrogate, which JSON can spell, cannot be written out)."""
    if not isinstance(value, str):
        raise ValueError(f"{what} is {shown(value)}, not text")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} holds a character that is not Unicode text (a lone surrogate)") from None
    return value


def flag(value, what: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{what} is {shown(value)}, not true or false")
    return value


def listed(value, what: str) -> list | tuple:
    """A list (JSON's), or a tuple (what to_json leaves before it is written out)."""
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{what} is {shown(value)}, not a list")
    return value


def mapping(value, what: str) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"{what} is {shown(value)}, not an object")
    return value


def maybe(reader, value, what: str, *bounds):
    """None, or what `reader` makes of the value."""
    return None if value is None else reader(value, what, *bounds)


def each(reader, values, what: str, *bounds) -> tuple:
    """A list read item by item."""
    return tuple(reader(v, f"{what}[{i}]", *bounds) for i, v in enumerate(listed(values, what)))


def json_file(path) -> object:
    """A file's JSON; ValueError naming the file and why it cannot be read."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{Path(path).name}: {str(exc)[:120]}") from None


def json_file_as(path, error: type[Exception], what: str) -> object:
    """json_file, with its ValueError raised as `error`: "cannot read `what` from" the file and why."""
    try:
        return json_file(path)
    except ValueError as exc:
        raise error(f"cannot read {what} from {exc}") from None


@contextmanager
def damage_as(error: type[Exception], what: str):
    """While `what` (a file's JSON, as "the trace") is read field by field: a field it lacks (KeyError) or one of the
    wrong kind or range (TypeError, ValueError) raised as `error`, in one line saying `what` is damaged."""
    try:
        yield
    except KeyError as exc:
        raise error(f"{what} is damaged (it has no {str(exc)[:60]})") from None
    except (TypeError, ValueError) as exc:
        raise error(f"{what} is damaged ({str(exc)[:160]})") from None
