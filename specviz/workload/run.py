"""Running a workload: prompt by prompt, plain decoding once, then every drafter that can run, each compared with
that one plain run; the view after each run starts and, while one runs, every so often. Pure Python: how a side is
decoded (in this process, or through a GPU worker's calls) is the caller's `run_side`."""

import time
from collections.abc import Callable, Generator, Iterator

from ..drafters.suffix_index import RunMemory
from ..errors import SpecvizError, first_line
from ..events import PLAIN, StepEvent
from ..trace import Divergence
from .view import WorkloadView

# run_side(prompt index, side name, plain decoding's tokens for a greedy drafter run, else None) yields the side's
# StepEvents in order and, for a drafter given plain's tokens, where it parted from them (a Divergence) at the end.
RunSide = Callable[[int, str, list[int] | None], Iterator[StepEvent | Divergence]]
# decode_one(prompt index, side name, plain's tokens or None, a memory copy or None) yields as a RunSide does and
# returns the prompt's token ids once the side ended (None: it did not end).
DecodeOne = Callable[
    [int, str, list[int] | None, RunMemory | None], Generator[StepEvent | Divergence, None, list | None]
]


def side_runner(decode_one: DecodeOne, memories: dict[str, RunMemory]) -> RunSide:
    """The RunSide the CLI (decoding here) and the app (through the device) share: a drafter that copies from earlier
    runs drafts from a copy of its memory, which its own run fills as it goes, and once the run has ended its
    output joins the memory the workload keeps, once."""

    def run_side(i: int, side: str, plain_ids: list[int] | None) -> Iterator[StepEvent | Divergence]:
        memory = memories.get(side)
        tokens = []
        steps = decode_one(i, side, plain_ids, None if memory is None else memory.copy())
        try:
            while True:
                try:
                    item = next(steps)
                except StopIteration as end:
                    if memory is not None and end.value is not None:
                        memory.remember(end.value, tokens)
                    return
                if isinstance(item, StepEvent):
                    tokens.extend(item.tokens)
                yield item
        finally:
            steps.close()  # a stopped workload ends the side's decoding (under ZeroGPU, its worker) at once

    return run_side


def run_workload(
    view: WorkloadView,
    run_side: RunSide,
    stopped: Callable[[], bool] = lambda: False,
    every_s: float = 0.5,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[WorkloadView]:
    """Fill `view` run by run, yielding it as it fills; a stop ends the run under way (it is not counted) and keeps
    every run that finished."""
    began = clock()
    shown = [clock()]
    for i in range(len(view.prompts)):
        yield from run_prompt(view, i, run_side, stopped, every_s, clock, shown)
    view.end(stopped(), clock() - began)
    yield view


def run_prompt(
    view: WorkloadView,
    i: int,
    run_side: RunSide,
    stopped: Callable[[], bool] = lambda: False,
    every_s: float = 0.5,
    clock: Callable[[], float] = time.perf_counter,
    shown: list[float] | None = None,
) -> Iterator[WorkloadView]:
    """Prompt i decoded plainly, then by every drafter, into `view`'s cells, yielding the view before each run and
    every `every_s` while one runs (`shown`: when it was last yielded, shared across prompts)."""
    shown = [clock()] if shown is None else shown
    for side in view.sides:
        if stopped():
            break
        plain = view.finished_cell(i, PLAIN)
        cell = view.cell(i, side)
        view.running = (i, side)
        if side != PLAIN and plain is None:
            cell.note = "failed: plain decoding did not finish this prompt"
            cell.done = True
            continue
        view.message = f"prompt {i + 1} of {len(view.prompts)}: {_name(view, side)}"
        yield view
        start = clock()
        try:
            for item in run_side(i, side, plain.tokens if plain is not None and view.greedy else None):
                if isinstance(item, Divergence):
                    cell.divergence = item
                else:
                    cell.events.append(item)
                cell.wall_s = clock() - start
                if stopped():
                    break
                if clock() - shown[0] >= every_s:
                    shown[0] = clock()
                    yield view
        except SpecvizError as exc:  # e.g. a tree on a model whose attention takes no mask: the others go on
            cell.note = f"failed: {first_line(exc)}"
            cell.events = []
        cell.done = not stopped()


def _name(view: WorkloadView, side: str) -> str:
    if side == PLAIN:
        return "plain decoding"
    return next((c.words for c in view.contenders if c.name == side), side)
