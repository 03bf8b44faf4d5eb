"""What a run under load may ask for, checked before any model loads, pure Python, with the one set of bounds the CLI
and the app both hold it to: its points (concurrency levels, how many requests decode together at each, or request
rates with the most rows decoding at once), its rounds (how often each point and lane runs), the latency objective
(SLO), and when each request arrives (all at 0 for a level; a seeded Poisson process at a rate, or a recorded trace).
"""

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

from .. import reading as read
from ..errors import InvalidRequest

DEFAULT_LEVELS = (1, 2, 4, 8, 16, 32)
MAX_ROWS = 256  # the most requests that decode together
LEVEL_WORDS = f"a concurrency level is a whole number of requests from 1 to {MAX_ROWS}"
MAX_REQUESTS = 10_000
MAX_RATE = 1_000.0  # requests per second
MAX_TRACE_BYTES = 2**20
# Runs of each point and lane; the figures are the median round's. Every round repeats the whole run, and the app's
# device call asks ZeroGPU for time in proportion (app/device_calls.under_load_seconds, capped at LONGEST_CALL_S):
# five rounds of a small concurrency sweep (levels 1, 2, 4; two lanes; 64 new tokens)
# ask about 110 s of the 300 s a call gets.
ROUNDS = range(1, 6)


@dataclass(frozen=True)
class Point:
    """Where one run of every lane stands: a concurrency level (every request at 0, a row for each) or a request
    rate's schedule (its arrivals, at most `max_rows` decoding together)."""

    key: float  # the level (a whole number of requests) or the rate (requests per second; 0.0: a recorded trace)
    arrivals: tuple[float, ...]
    max_rows: int


def level_points(levels: tuple[int, ...]) -> tuple[Point, ...]:
    """A concurrency level is traffic whose requests all arrive at 0, with a row for each."""
    return tuple(Point(level, (0.0,) * level, level) for level in levels)


def rate_points(schedules: dict[float, tuple[float, ...]], max_rows: int) -> tuple[Point, ...]:
    return tuple(Point(rate, arrivals, max_rows) for rate, arrivals in schedules.items())


def requests(n: int) -> str:
    return f"{n} request{'s' * (n != 1)}"


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


@dataclass(frozen=True)
class Slo:
    """The latency a request must meet to count as good: its time to first token and its time per output token."""

    ttft_s: float
    tpot_s: float

    def met(self, ttft_s: float, tpot_s: float | None) -> bool:
        """A request of one token has no TPOT: its TTFT decides."""
        return ttft_s <= self.ttft_s and (tpot_s is None or tpot_s <= self.tpot_s)


def _positive(text, what: str, unit: str, high: float) -> float:
    """A number of `unit` in (0, high], as typed or passed; one line naming `what` and its unit otherwise."""
    try:
        value = float(str(text).strip()) if not isinstance(text, (int, float)) or isinstance(text, bool) else text
    except ValueError:
        value = None
    if value is None or isinstance(value, bool) or not math.isfinite(value) or not 0 < value <= high:
        raise InvalidRequest(f"{what} is a number of {unit} above 0 and at most {high:g}, got {read.shown(text)}")
    return float(value)


def check_rates(rates) -> tuple[float, ...]:
    """Request rates (requests per second) as given, comma-separated text or numbers: each above 0, ascending."""
    items = rates.split(",") if isinstance(rates, str) else list(rates)
    found = {_positive(item, "a request rate", "requests per second", MAX_RATE) for item in items if str(item).strip()}
    if not found:
        raise InvalidRequest("no request rates given (e.g. --rates 0.1,0.2,0.4)")
    return tuple(sorted(found))


def check_slo(ttft_s, tpot_s) -> Slo:
    return Slo(
        _positive(ttft_s, "the TTFT objective", "seconds", 3600.0),
        _positive(tpot_s, "the TPOT objective", "seconds", 600.0),
    )


def check_count(value, what: str, high: int) -> int:
    """A whole number in 1..high (an int, or its text)."""
    text = str(value).strip()
    if isinstance(value, bool) or not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= high:
        raise InvalidRequest(f"{what} is a whole number in 1..{high}, got {read.shown(value)}")
    return int(text)


def poisson_arrivals(rate: float, requests: int, seed: int = 0) -> tuple[float, ...]:
    """`requests` arrival times (seconds from 0) of a Poisson process of `rate` per second: exponential gaps, the
    first request at 0 so a run starts when it starts. The same seed gives the same times."""
    draw = random.Random(seed)
    t = 0.0
    times = []
    for _ in range(requests):
        times.append(t)
        t += draw.expovariate(rate)
    return tuple(times)


def read_arrivals(path: str | Path) -> tuple[float, ...]:
    """A recorded trace of arrival times: a JSON list of seconds, or one number per line (blank lines and lines
    starting with # skipped). Times need not be sorted; they are shifted so the first arrives at 0."""
    name = Path(path).name
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidRequest(f"cannot read the arrivals file {name}: {exc.strerror or exc}") from None
    if len(data) > MAX_TRACE_BYTES:
        raise InvalidRequest(f"the arrivals file {name} is over 1 MiB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidRequest(f"the arrivals file {name} is not UTF-8 text") from None
    stripped = text.strip()
    if stripped.startswith(("[", "{")):
        try:
            items = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise InvalidRequest(
                f"the arrivals file {name} is not a JSON list: {exc.msg} at line {exc.lineno}"
            ) from None
        if not isinstance(items, list):
            raise InvalidRequest(f"the arrivals file {name} is not a JSON list of seconds")
        where = [f"item {i + 1}" for i in range(len(items))]
    else:
        lines = [(i + 1, s.strip()) for i, s in enumerate(text.splitlines())]
        kept = [(n, s) for n, s in lines if s and not s.startswith("#")]
        items = [s for _, s in kept]
        where = [f"line {n}" for n, _ in kept]
    if not isinstance(items, list) or not items:
        raise InvalidRequest(f"the arrivals file {name} holds no arrival times (seconds, one per line or a JSON list)")
    if len(items) > MAX_REQUESTS:
        raise InvalidRequest(f"the arrivals file {name} holds {len(items)} arrivals; at most {MAX_REQUESTS}")
    times = [_arrival(item, f"{name} {w}") for item, w in zip(items, where)]
    first = min(times)
    return tuple(sorted(t - first for t in times))


def _arrival(item, what: str) -> float:
    try:
        value = float(item) if isinstance(item, str) else read.number(item, what, 0.0, 1e9)
    except (ValueError, TypeError):
        value = None
    if value is None or not math.isfinite(value) or not 0 <= value <= 1e9:
        raise InvalidRequest(f"{what}: an arrival time is seconds, 0 or more, got {read.shown(item)}")
    return value
