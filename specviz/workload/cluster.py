"""A workload on a Ray cluster: one actor per device (a GPU, or a machine's CPUs) loads the models once and decodes
whole prompts (plain decoding, then every drafter, as on one machine); the prompts go to whichever actor is free, and
each finished prompt's runs merge into the one view the report, the CSV and the progress lines read. An actor that dies
mid-prompt is restarted by Ray and its prompt runs again on the next free actor: no prompt is lost, none is counted
twice, and its cells say they were retried. Ray is an optional extra; without it --cluster says how to install it."""

import os
import socket
import time
from collections import deque
from collections.abc import Callable, Iterator

from ..errors import InvalidRequest
from .run import RunSide, run_prompt
from .view import Cell, WorkloadView

INSTALL = 'this needs Ray: pip install "specviz[cluster]"'
RESTARTS = 3  # times Ray restarts one actor that died before the workload gives up on it
ASKS = 600  # times a dead actor is asked (0.1 s apart) whether it is up again before it leaves the rotation

# prepare() -> (a WorkloadView of the whole workload, how one side of one prompt is decoded), with the models loaded:
# a module-level function (or a partial of one) so that it travels to the actors by reference.
Prepare = Callable[[], tuple[WorkloadView, RunSide]]


def import_ray():
    try:
        import ray
    except ImportError:
        raise InvalidRequest(f"--cluster: {INSTALL}") from None
    return ray


def connect(address: str, actors: int | None) -> int:
    """Join the cluster at `address` ("local": start one on this machine with `actors` CPUs) and say how many actors
    to run: as asked, else one per GPU, else one per alive node."""
    ray = import_ray()
    if actors is not None and actors < 1:
        raise InvalidRequest(f"--actors {actors}: at least one")
    if not ray.is_initialized():
        try:
            if address == "local":
                ray.init(num_cpus=actors or os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=address, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise InvalidRequest(f"--cluster {address}: {str(exc).splitlines()[0]}") from None
    if actors is not None:
        return actors
    gpus = int(ray.cluster_resources().get("GPU", 0))
    return gpus or max(1, sum(1 for n in ray.nodes() if n.get("Alive")))


class PromptWorker:
    """One actor: the models loaded once (prepare), then whole prompts decoded into its own copy of the view."""

    def __init__(self, prepare: Prepare, threads: int):
        import ray
        import torch

        torch.set_num_threads(max(1, threads))
        self.view, self.run_side = prepare()
        self.where = f"{socket.gethostname()} (node {ray.get_runtime_context().get_node_id()[:8]})"

    def ready(self) -> bool:
        """Answers once the actor is up (after a restart: once it has prepared its models again)."""
        return True

    def run(self, i: int) -> tuple[str, dict[str, Cell]]:
        import torch

        with torch.inference_mode():
            for _ in run_prompt(self.view, i, self.run_side, every_s=3600):
                pass
        return self.where, {side: self.view.cells[i, side] for side in self.view.sides if (i, side) in self.view.cells}


class ClusterRun:
    """The workload's prompts over `actors` Ray actors; `run()` yields the view as prompts finish, and `actors` is
    public so that an operator (or a test) may see or kill one."""

    def __init__(self, view: WorkloadView, prepare: Prepare, actors: int):
        ray = import_ray()
        cpus = int(ray.cluster_resources().get("CPU", 1))
        gpus = int(ray.cluster_resources().get("GPU", 0))
        each = dict(num_gpus=1) if gpus >= actors else dict(num_cpus=max(1, cpus // actors))
        remote = ray.remote(max_restarts=RESTARTS, max_task_retries=0, **each)(PromptWorker)
        self.view, self.ray = view, ray
        self.actors = [remote.remote(prepare, each.get("num_cpus", 1)) for _ in range(actors)]
        self.retried: set[int] = set()
        self.pending: dict = {}  # task -> (prompt, actor) while it runs
        self.deaths = [0] * actors  # per actor: how often it died under a prompt
        self.asked = [0] * actors  # per actor: how often it was asked whether it is up again
        self.tries: dict[int, int] = {}  # per prompt: how often an actor died under it

    def run(self, stopped: Callable[[], bool] = lambda: False, every_s: float = 0.5) -> Iterator[WorkloadView]:
        ray, view, began = self.ray, self.view, time.perf_counter()
        waiting, free, pending = deque(range(len(view.prompts))), deque(range(len(self.actors))), self.pending
        try:
            while (waiting or pending) and not stopped():
                if not free and not pending:  # every actor is gone for good: what is left cannot run
                    self._give_up(waiting, "every actor died")
                    break
                while waiting and free:
                    i, a = waiting.popleft(), free.popleft()
                    pending[self.actors[a].run.remote(i)] = (i, a)
                running = sum(i is not None for i, _ in pending.values())
                view.message = f"{len(view.prompts) - len(waiting) - running} of {len(view.prompts)} prompts done"
                view.message += f"; {running} running on {len(self.actors)} actors"
                done, _ = ray.wait(list(pending), num_returns=1, timeout=every_s)
                if done:
                    self._land(done[0], pending.pop(done[0]), waiting, free)
                yield view
        finally:
            for actor in self.actors:
                ray.kill(actor, no_restart=True)
        view.running, view.finished, view.stopped = None, True, stopped()
        view.wall_s = time.perf_counter() - began
        view.message = "stopped: the runs that finished are kept" if view.stopped else "done"
        yield view

    def _land(self, ref, placed: tuple[int | None, int], waiting: deque, free: deque) -> None:
        """A prompt's runs into the view; or, its actor having died, the prompt back at the head of the queue and
        the actor asked whether it is up again (`placed` (None, actor): that question's answer)."""
        i, a = placed
        try:
            answer = self.ray.get(ref)
        except self.ray.exceptions.RayActorError:  # Ray restarts the actor; it gets work once it answers again
            self._revive(a, died=i is not None)
            if i is not None:
                self.retried.add(i)
                self.tries[i] = self.tries.get(i, 0) + 1
                if self.tries[i] > RESTARTS:  # a prompt that kills every actor it meets is not tried forever
                    self._give_up([i], f"its actor died {self.tries[i]} times")
                else:
                    waiting.appendleft(i)
            return
        free.append(a)
        if i is None:  # the actor is up again
            return
        where, cells = answer
        name = f"actor {a + 1} on {where}"
        for side, cell in cells.items():
            cell.node, cell.retried = name, i in self.retried
            self.view.cells[i, side] = cell

    def _revive(self, a: int, died: bool) -> None:
        """Ask a dead actor whether Ray has brought it back, unless it died more often than Ray restarts one."""
        self.deaths[a] += died
        self.asked[a] += 1
        if self.deaths[a] <= RESTARTS and self.asked[a] <= ASKS:  # else it leaves the rotation
            time.sleep(0.1)  # a restarting actor may refuse calls at once: ask again in a moment
            self.pending[self.actors[a].ready.remote()] = (None, a)

    def _give_up(self, prompts, why: str) -> None:
        for i in list(prompts):
            for side in self.view.sides:
                cell = self.view.cell(i, side)
                cell.note, cell.done, cell.retried = f"failed: {why}", True, i in self.retried


def run_on_cluster(
    view: WorkloadView,
    prepare: Prepare,
    address: str,
    actors: int | None = None,
    stopped: Callable[[], bool] = lambda: False,
    every_s: float = 0.5,
) -> Iterator[WorkloadView]:
    """run_workload's view, filled by a Ray cluster's actors (each prepares its own models) instead of here."""
    yield from ClusterRun(view, prepare, connect(address, actors)).run(stopped, every_s)
