"""The line for the device: the app lets one run at a time onto it, and tells every waiting visitor their place and
what is ahead of them (a Grand Prix of N lanes counts as N runs)."""

import threading
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

from ..render.grand_prix_lanes import ordinal


@dataclass(frozen=True, eq=False)
class Ticket:
    session: str
    runs: int  # sides that decode the whole budget: 2 for a race, N for a Grand Prix of N lanes
    what: str  # "race", "Grand Prix of 9 lanes", ...


class DeviceLine:
    """Runs on the device and clicks waiting for it. `loading` says what is loading, while a pair loads."""

    def __init__(self, loading: Callable[[], str] = lambda: ""):
        self.loading = loading
        self._lock = threading.Lock()
        self._on: list[Ticket] = []  # runs under way on the device
        self._line: list[Ticket] = []  # visitors' clicks waiting for the device, oldest first

    def wait(self, session: str, runs: int, what: str) -> None:
        """A click whose run will queue for the device takes its place in line (a new click replaces the session's
        place), until its run starts."""
        with self._lock:
            self._line = [t for t in self._line if t.session != session] + [Ticket(session, runs, what)]

    def leave(self, session: str) -> None:
        """The session's click no longer waits (its run ended, or failed before it reached the device)."""
        with self._lock:
            self._line = [t for t in self._line if t.session != session]

    def waiting(self, session: str) -> bool:
        """Whether the session's click still waits for the device."""
        with self._lock:
            return any(t.session == session for t in self._line)

    @contextmanager
    def on_device(self, session: str = "", runs: int = 1, what: str = "run"):
        """A run holds the device: its ticket leaves the line."""
        ticket = Ticket(session, runs, what)
        self.leave(session)
        with self._lock:
            self._on.append(ticket)
        try:
            yield
        finally:
            with self._lock:
                self._on.remove(ticket)

    def busy(self, session: str = "") -> str:
        """What a run started now (or the session's run waiting in line) would wait for, in words: its place in line
        and the runs ahead of it; empty when the device is free."""
        loading = self.loading()
        if loading:
            return f"waiting for the models to load: {loading}"
        with self._lock:
            mine = next((i for i, t in enumerate(self._line) if t.session == session), len(self._line))
            on = [t for t in self._on if t.session != session]
            before = self._line[:mine]
        if not on and not before:
            return ""
        runs = sum(t.runs for t in on + before)
        place = len(before) + 1
        now = f"another visitor's {on[0].what} has the device" if on else "the device is being handed on"
        return (
            f"queued: {ordinal(place)} in line, {runs} run{'s' * (runs != 1)} ahead of yours ({now}); "
            "yours starts when they end"
        )
