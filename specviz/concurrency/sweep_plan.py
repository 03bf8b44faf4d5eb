"""What a concurrency sweep may ask for, checked before any model loads, pure Python: its levels (how many requests
decode together at each) and its rounds (how often each level and lane runs), with the one set of bounds the CLI and
the app both hold a sweep to."""

from .. import reading as read
from ..errors import InvalidRequest

DEFAULT_LEVELS = (1, 2, 4, 8, 16, 32)
MAX_ROWS = 256  # the most requests one level decodes together
LEVEL_WORDS = f"a concurrency level is a whole number of requests from 1 to {MAX_ROWS}"
# Runs of each level and lane; the figures are the median round's. Every round repeats the whole sweep, and the app's
# device call asks ZeroGPU for time in proportion (app/device_calls.concurrency_seconds, capped at LONGEST_CALL_S):
# five rounds of a small sweep (levels 1, 2, 4; two lanes; 64 new tokens) ask about 110 s of the 300 s a call gets.
ROUNDS = range(1, 6)


def check_rows(rows) -> int:
    """One level: a whole number of requests in 1..MAX_ROWS."""
    if not isinstance(rows, int) or isinstance(rows, bool) or not 1 <= rows <= MAX_ROWS:
        raise InvalidRequest(f"{LEVEL_WORDS}, got {rows!r}")
    return rows


def check_levels(levels) -> tuple[int, ...]:
    """Levels as given (a comma-separated text or numbers), each a number of requests, ascending and distinct."""
    items = levels.split(",") if isinstance(levels, str) else list(levels)
    found = []
    for item in items:
        text = str(item).strip()
        if not (text.isascii() and text.lstrip("+").isdigit()):
            raise InvalidRequest(f"{LEVEL_WORDS}, got {item!r}")
        found.append(check_rows(int(text)))
    if not found:
        raise InvalidRequest("no concurrency levels given (e.g. --levels 1,4,16)")
    return tuple(sorted(set(found)))


def check_rounds(rounds) -> int:
    """Rounds as the CLI or the screen sends them (a whole number, also as a slider's float or as text) when within
    ROUNDS; anything else is one line naming the range."""
    whole = None
    if isinstance(rounds, int) and not isinstance(rounds, bool):
        whole = rounds
    elif isinstance(rounds, float) and rounds.is_integer():
        whole = int(rounds)
    elif isinstance(rounds, str) and rounds.strip().isascii() and rounds.strip().isdigit():
        whole = int(rounds)
    if whole not in ROUNDS:
        raise InvalidRequest(
            f"rounds is a number of runs of each level in {ROUNDS[0]}..{ROUNDS[-1]}, got {read.shown(rounds)}"
        )
    return whole
