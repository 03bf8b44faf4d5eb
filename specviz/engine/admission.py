"""When each request joins the batch: iteration-level scheduling, as continuous-batching servers do it.

A request arrives at its time (seconds after the run began) and waits in a queue, first come first served. At each
step boundary the requests that have arrived join, as many as there are free rows (at most `max_rows` decode together);
a joining request's prompt is read first (its prefill), then it decodes with the others from the next step, and it
leaves the batch when it finishes. When no row is decoding, the loop waits for the next arrival. Every request at 0
with a row for each is the static batch: all read together, then decoded together.
"""

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import InvalidRequest

WAIT_SLICE_S = 0.05  # an idle loop waits for the next arrival in slices this long, so a stop is heard


@dataclass
class Admission:
    """The queue of one run's requests. `admitted[r]`: when request r's prefill began, seconds after the run began."""

    arrivals: list[float]  # per request, seconds after the run began
    max_rows: int
    clock: Callable[[], float] = time.perf_counter
    sleep: Callable[[float], None] = time.sleep
    admitted: dict[int, float] = field(default_factory=dict)
    began: float | None = None
    waiting: deque = field(default_factory=deque)

    def __post_init__(self):
        if self.max_rows < 1:
            raise InvalidRequest(f"at most {self.max_rows} rows decode together: at least one must")
        if any(not (a >= 0) for a in self.arrivals):  # not (a >= 0) also catches NaN
            raise InvalidRequest("every request arrives at 0 seconds or later")

    @classmethod
    def together(cls, requests: int) -> "Admission":
        """Every request at 0, a row for each: the static batch."""
        return cls([0.0] * requests, max(1, requests))

    def begin(self) -> None:
        """The run begins now: the arrival times count from here."""
        self.began = self.clock()
        self.waiting = deque(sorted(range(len(self.arrivals)), key=lambda r: (self.arrivals[r], r)))

    def now(self) -> float:
        return self.clock() - self.began

    def due(self, decoding: int, stop=None) -> list[int]:
        """The requests that join at this step boundary, in arrival order, while `decoding` rows are decoding: those
        arrived, up to the free rows. With no row decoding it waits until the next one arrives (or a stop); [] once
        every request has joined."""
        if self.began is None:
            self.begin()
        if not self.waiting:
            return []
        while decoding == 0 and self.arrivals[self.waiting[0]] > self.now():
            if stop is not None and stop.is_set():
                return []
            self.sleep(min(WAIT_SLICE_S, self.arrivals[self.waiting[0]] - self.now()))
        now = self.now()
        joining = []
        while self.waiting and decoding + len(joining) < self.max_rows and self.arrivals[self.waiting[0]] <= now:
            joining.append(self.waiting.popleft())
        self.admitted.update(dict.fromkeys(joining, now))
        return joining
