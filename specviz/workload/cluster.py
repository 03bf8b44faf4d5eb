"""A workload on a Ray cluster (ray_shards.py): each actor prepares the workload as one machine would (models loaded
once) and decodes whole prompts, plain decoding then every drafter; each finished prompt's runs merge into the one view
the report, the CSV and the progress lines read, saying which actor ran them and whether an actor died under them
first."""

import time
from collections.abc import Callable, Iterator
from functools import partial

from .ray_shards import ClusterRun, connect
from .run import RunSide, run_prompt
from .view import Cell, WorkloadView

# prepare() -> (a WorkloadView of the whole workload, how one side of one prompt is decoded), with the models loaded:
# a module-level function (or a partial of one) so that it travels to the actors by reference.
Prepare = Callable[[], tuple[WorkloadView, RunSide]]


def prompt_runner(prepare: Prepare) -> Callable[[int, Callable], dict[str, Cell]]:
    """In an actor: the workload prepared once; then prompt i's cells, plain decoding's and every drafter's (the
    driver's lines come from the cells: a prompt's runs are quick to land)."""
    view, run_side = prepare()

    def run(i: int, say: Callable[[str], None]) -> dict[str, Cell]:
        for _ in run_prompt(view, i, run_side, every_s=3600):
            pass
        return {side: view.cells[i, side] for side in view.sides if (i, side) in view.cells}

    return run


def on_cluster(view: WorkloadView, prepare: Prepare, actors: int) -> ClusterRun:
    """The workload's prompts as shards over `actors` actors."""
    return ClusterRun(len(view.prompts), partial(prompt_runner, prepare), actors)


def fill(
    view: WorkloadView, cluster: ClusterRun, stopped: Callable[[], bool] = lambda: False, every_s: float = 0.5
) -> Iterator[WorkloadView]:
    """run_workload's view, filled as the cluster's prompts land."""
    began = time.perf_counter()
    for landed in cluster.run(stopped, every_s):
        if landed is not None:
            for side in view.sides:
                cell = landed.result.get(side) if landed.result else None
                if cell is None:  # given up (or, a side that never ran): its cell says why
                    cell = view.cell(landed.shard, side)
                    cell.note = cell.note or landed.failed
                    cell.done = True
                cell.node = landed.where
                cell.retried = landed.retried
                view.cells[landed.shard, side] = cell
        view.message = cluster.progress("prompts")
        yield view
    view.end(stopped(), time.perf_counter() - began)
    yield view


def run_on_cluster(
    view: WorkloadView,
    prepare: Prepare,
    address: str,
    actors: int | None = None,
    stopped: Callable[[], bool] = lambda: False,
    every_s: float = 0.5,
) -> Iterator[WorkloadView]:
    """run_workload's view, filled by a Ray cluster's actors (each prepares its own models) instead of here."""
    yield from fill(view, on_cluster(view, prepare, connect(address, actors)), stopped, every_s)
