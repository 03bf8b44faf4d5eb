"""Figures the physics forbids, found from what a run measured. A speculative step runs the target over at least the
tokens a plain step does, so it costs at least a plain step, and it writes τ tokens a row where a plain step writes
one: no speedup over plain decoding, measured on a steady machine, exceeds τ. A batch of B rows costs at least what
a smaller batch does and at most B/b times a batch of b. A figure beyond these bounds (by more than SLACK, for the
timer's noise and a verify that costs a little less than a plain step) says the machine's speed moved between the
two runs compared, not what the method gives: it is shown flagged, and a verdict leaves it out.
"""

SLACK = 1.25  # how far past a bound a figure may land before it is taken for the machine moving
MOVED = "the machine's speed moved"
MOVED_MARK = "⚠ machine moved"  # beside a figure the physics forbids, in every table


def speedup_forbidden(speedup: float | None, tau: float | None) -> bool:
    """Whether a speedup over plain decoding is more than its τ (tokens a row per target forward) allows."""
    return speedup is not None and tau is not None and tau > 0 and speedup > SLACK * tau


def moved_batches(step_s: dict[int, float]) -> set[int]:
    """The batch sizes whose plain step (seconds, by rows) falls outside what the smaller batches measured allow:
    slower than B/b times a batch of b, or faster than any smaller batch. The smallest batch is the reference (it
    ran first); each larger one is checked against the smaller ones not already flagged."""
    steady: dict[int, float] = {}
    moved = set()
    for rows in sorted(step_s):
        seconds = step_s[rows]
        dearest = min((s * rows / b for b, s in steady.items()), default=None)
        cheapest = max(steady.values(), default=None)
        if (dearest is not None and seconds > SLACK * dearest) or (cheapest is not None and seconds < cheapest / SLACK):
            moved.add(rows)
        else:
            steady[rows] = seconds
    return moved


def shown_speedup(speedup: float | None, tau: float | None, form: str = "{:.2f}×") -> str:
    """A speedup as every table shows it: "–" when none, flagged where its τ forbids it."""
    if speedup is None:
        return "–"
    return form.format(speedup) + (f" {MOVED_MARK}" if speedup_forbidden(speedup, tau) else "")


def forbidden_words(speedup: float, tau: float) -> str:
    """Why a speedup was left out, in a line a reader can check."""
    return f"{MOVED}: {speedup:.2f}× at τ {tau:.2f}, where a verify costing at least a plain step allows {tau:.2f}×"
