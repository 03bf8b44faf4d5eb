"""Shards of work on a Ray cluster: one actor per device (a GPU, or a machine's CPUs) prepares its job once (the models
loaded), then runs whole shards (a workload's prompts, a benchmark's prompt kinds) as they come, each to whichever
actor is free. An actor that dies mid-shard is restarted by Ray and its shard runs again on the next free actor: none
is lost, none is counted twice, and it lands marked retried. Ray is an optional extra; without it --cluster says how to
install it."""

import os
import socket
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..errors import InvalidRequest

INSTALL = 'this needs Ray: pip install "specviz[cluster]"'
RESTARTS = 3  # times Ray restarts one actor that died before the run gives up on it
ASKS = 600  # times a dead actor is asked (0.1 s apart) whether it is up again before it leaves the rotation

# make() -> run(shard index, say) -> the shard's result, with the models loaded: a module-level function (or a partial
# of one) so that it travels to the actors by reference; the runner it returns stays in its actor, and say(line) sends
# a progress line to the driver as the shard goes.
Make = Callable[[], Callable[[int, Callable[[str], None]], object]]


def import_ray():
    try:
        import ray
        import ray.util.queue  # noqa: F401 - the actors' progress lines travel through it
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


class ShardWorker:
    """One actor: its job prepared once (make), then whole shards, its progress lines sent to the driver's queue."""

    def __init__(self, make: Make, threads: int, news, number: int):
        import ray
        import torch

        torch.set_num_threads(max(1, threads))
        self.run_shard = make()
        self.news = news
        self.number = number
        self.node = f"{socket.gethostname()} (node {ray.get_runtime_context().get_node_id()[:8]})"

    def say(self, line: str) -> None:
        self.news.put_nowait(f"[actor {self.number}] {line}")

    def ready(self) -> bool:
        """Answers once the actor is up (after a restart: once it has prepared its job again)."""
        return True

    def run(self, i: int) -> tuple[str, object]:
        import torch

        with torch.inference_mode():
            return self.node, self.run_shard(i, self.say)


@dataclass(frozen=True)
class Landed:
    """One shard's end: its result and the actor that ran it, or why it was given up."""

    shard: int
    actor: int  # the number of the actor that ran it (1 for the first); 0 when it was given up
    node: str  # "HOST (node ID)" of that actor; "" when it was given up
    result: object  # None when it was given up
    retried: bool  # an actor died under it before, and another ran it again
    failed: str = ""  # why it was given up

    @property
    def where(self) -> str:
        """As reports show it, "actor N on HOST (node ID)"; "" when it was given up."""
        return f"actor {self.actor} on {self.node}" if self.actor else ""


class ClusterRun:
    """`shards` shards over `actors` Ray actors; `run()` yields each shard as it lands (and None every `every_s`
    meanwhile). `actors` and `pending` are public so that an operator (or a test) may see or kill one."""

    def __init__(self, shards: int, make: Make, actors: int):
        ray = import_ray()
        cpus = int(ray.cluster_resources().get("CPU", 1))
        gpus = int(ray.cluster_resources().get("GPU", 0))
        each = dict(num_gpus=1) if gpus >= actors else dict(num_cpus=max(1, cpus // actors))
        remote = ray.remote(max_restarts=RESTARTS, max_task_retries=0, **each)(ShardWorker)
        self.shards = shards
        self.ray = ray
        self.news = ray.util.queue.Queue(actor_options={"num_cpus": 0})  # the actors' progress lines, in order
        self.actors = [remote.remote(make, each.get("num_cpus", 1), self.news, a + 1) for a in range(actors)]
        self.retried: set[int] = set()
        self.pending: dict = {}  # task -> (shard, actor) while it runs; (None, actor): asking a dead actor
        self.waiting: deque[int] = deque(range(shards))
        self.deaths = [0] * actors  # per actor: how often it died under a shard
        self.asked = [0] * actors  # per actor: how often it was asked whether it is up again
        self.tries: dict[int, int] = {}  # per shard: how often an actor died under it

    def running(self) -> int:
        """Shards on an actor now (a question to a restarting actor, (None, actor) in `pending`, is not one)."""
        return sum(i is not None for i, _ in self.pending.values())

    def progress(self, what: str) -> str:
        """E.g. "3 of 10 prompts done; 2 running on 2 actors"."""
        running = self.running()
        done = self.shards - len(self.waiting) - running
        return f"{done} of {self.shards} {what} done; {running} running on {len(self.actors)} actors"

    def heard(self) -> list[str]:
        """The progress lines the actors sent since the last call."""
        return self.news.get_nowait_batch(self.news.qsize())

    def run(self, stopped: Callable[[], bool] = lambda: False, every_s: float = 0.5) -> Iterator[Landed | None]:
        ray = self.ray
        waiting = self.waiting
        pending = self.pending
        free = deque(range(len(self.actors)))
        try:
            # Until every shard has landed: a question still out to a restarting actor holds nothing.
            while (waiting or self.running()) and not stopped():
                if not free and not pending:  # every actor is gone for good: what is left cannot run
                    while waiting:
                        yield self._given_up(waiting.popleft(), "every actor died")
                    break
                while waiting and free:
                    i = waiting.popleft()
                    a = free.popleft()
                    pending[self.actors[a].run.remote(i)] = (i, a)
                done, _ = ray.wait(list(pending), num_returns=1, timeout=every_s)
                yield self._land(done[0], pending.pop(done[0]), free) if done else None
        finally:
            for actor in [*self.actors, self.news.actor]:
                ray.kill(actor, no_restart=True)

    def _land(self, ref, placed: tuple[int | None, int], free: deque) -> Landed | None:
        """A shard's result; or, its actor having died, the shard back at the head of the queue and the actor asked
        whether it is up again (`placed` (None, actor): that question's answer)."""
        i, a = placed
        try:
            answer = self.ray.get(ref)
        except self.ray.exceptions.RayActorError:  # Ray restarts the actor; it gets work once it answers again
            self._revive(a, died=i is not None)
            if i is None:
                return None
            self.retried.add(i)
            self.tries[i] = self.tries.get(i, 0) + 1
            if self.tries[i] > RESTARTS:  # a shard that kills every actor it meets is not tried forever
                return self._given_up(i, f"its actor died {self.tries[i]} times")
            self.waiting.appendleft(i)
            return None
        free.append(a)
        if i is None:  # the actor is up again
            return None
        node, result = answer
        return Landed(i, a + 1, node, result, i in self.retried)

    def _revive(self, a: int, died: bool) -> None:
        """Ask a dead actor whether Ray has brought it back, unless it died more often than Ray restarts one."""
        self.deaths[a] += died
        self.asked[a] += 1
        if self.deaths[a] <= RESTARTS and self.asked[a] <= ASKS:  # else it leaves the rotation
            time.sleep(0.1)  # a restarting actor may refuse calls at once: ask again in a moment
            self.pending[self.actors[a].ready.remote()] = (None, a)

    def _given_up(self, i: int, why: str) -> Landed:
        return Landed(i, 0, "", None, i in self.retried, f"failed: {why}")
