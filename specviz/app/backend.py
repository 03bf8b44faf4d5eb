"""The app's run flows on the server side: a race, a γ sweep, a Grand Prix and a workload, each turning the device's
calls (device_calls.py) into the pure-Python views of specviz/views/. Under ZeroGPU those calls run in a forked GPU
worker: the server sends a checked Request and plain data, rebuilds each view from the packets that come back, keeps
each visitor's earlier runs itself (memories.py), lets one run at a time onto the device (device_line.py), and stops
a run by closing the call's generator (the worker ends at its next step)."""

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from functools import partial

from ..drafters.registry import NO_DRAFTER, kind
from ..drafters.suffix_index import RunMemory
from ..errors import InvalidRequest
from ..events import PLAIN
from ..models import encode_prompt
from ..record import TextTable, TokenTexts, make_trace
from ..runs import lane_runs, runtime_line
from ..runtimes.choice import in_forwards
from ..runtimes.runtime_registry import others_for
from ..serving.handoff import recording
from ..trace import RunModels, Side
from ..views.grand_prix import KIND as GRAND_PRIX
from ..views.grand_prix import GrandPrixView, starting_grid
from ..views.race import SPEC, Lane, RaceView
from ..views.sweep import SweepView
from ..workload.cluster import run_on_cluster
from ..workload.entrants import across_runtimes, drafter_names, entrants, lane_entrants, lane_of, setting_words
from ..workload.job import prepare
from ..workload.prompts import GPU_LIMITS, check_workload, limits_for
from ..workload.run import run_workload, side_runner
from ..workload.view import WorkloadView
from .device_calls import DeviceCalls, Packet, take
from .device_line import DeviceLine
from .elsewhere import LevelTables, cluster_job, entrants_production, race_production
from .memories import VisitorMemories
from .request import Request, entry_rules, read_request
from .shelf import ModelShelf
from .under_load import UnderLoad

Stopped = Callable[[], bool]


class Backend(UnderLoad):
    """`calls` is the device side: DeviceCalls over the same shelf, or its methods wrapped for a GPU worker (app.py).
    Every flow takes the run's values as the screen or the API sent them and reads them once (request.py)."""

    def __init__(self, shelf: ModelShelf, calls: DeviceCalls | None = None, cluster: str = ""):
        self.shelf = shelf
        self.cluster = cluster  # Your prompts runs there (a Ray address, or "local"); "" runs it on this device
        self.calls = calls or DeviceCalls(shelf)
        self.line = DeviceLine(lambda: shelf.loading)
        self.memories = VisitorMemories()
        self.level_tables = LevelTables()  # each visitor's last Concurrency sweep, for vLLM's settings

    def _check(self, values: Mapping, session: str) -> Request:
        """A race's or a sweep's values read, once: its speculative side needs a drafter, and its pair is a preset or
        one this visitor added, never another's."""
        if values.get("drafter", NO_DRAFTER) == NO_DRAFTER:
            raise InvalidRequest("the speculative side needs a drafter; 'none' is what the plain side runs")
        return read_request(values, self.shelf, session)

    def _load(self, asked: Request) -> Iterator[str]:
        """The pair at the precisions asked for (the draft's: the target's unless the request named another)."""
        return self.shelf.load(asked.pair, asked.dtype, draft_dtype=asked.draft_dtype, runtime=asked.runtime)

    def race(self, values: Mapping, stopped: Stopped = lambda: False, session: str = "") -> Iterator[RaceView]:
        """Views while loading, then after every decoding step of either side; the last one is final. The
        speculative side drafts from, and joins, the session's earlier runs."""
        asked = self._check(values, session)
        settings = asked.settings
        with self.line.on_device(session, 2, "race"):
            for line in self._load(asked):
                yield RaceView(plain=Lane(PLAIN), spec=Lane(SPEC), text_of=str, greedy=settings.greedy, message=line)
            pair = self.shelf.current()
            texts = TextTable()
            memory = self.memories.of(session) if asked.remembers else None
            view = RaceView(
                plain=Lane(PLAIN),
                spec=Lane(SPEC),
                text_of=texts,
                greedy=settings.greedy,
                mode=asked.mode,
                lossy=settings.lossy,
                production=race_production(asked, pair, self.level_tables.of(session, asked.pair)),
                precision=pair.choice.reason if pair.choice else "",
                runtime=runtime_line(pair),
            )
            began = time.perf_counter()
            call = self.calls.race(asked, None if memory is None else memory.copy())
            prompt_ids, end = yield from _relay(call, view, texts, pair, (began, stopped), view.hear)
            view.stopped = not (view.plain.done and view.spec.done)
            if end is not None:
                view.divergence = end.divergence
            elif settings.greedy:  # stopped before the device compared the two sides
                view.divergence = self._parted(asked, prompt_ids, view.plain.tokens, view.spec.tokens)
            if memory is not None and prompt_ids:  # the run joins the visitor's memory, as far as it went
                self.memories.remember(session, prompt_ids, view.spec.tokens)
        view.finished = True
        view.wall_s = time.perf_counter() - began
        view.runtime = runtime_line(pair, view.spec.events)
        sides = [Side(PLAIN, "", view.plain.events), Side(asked.drafter, view.mode, view.spec.events, view.divergence)]
        view.trace = make_trace(
            kind="race",
            prompt=asked.prompt,
            prompt_ids=prompt_ids,
            settings=settings,
            models=pair.models(view.exact),
            sides=sides,
            text_of=texts,
            wall_s=view.wall_s,
            stopped=view.stopped,
            made_with="the app",
            extra=recording(view.production),
        )
        yield view

    def _parted(self, asked: Request, prompt_ids: list[int], plain: list[int], spec: list[int]):
        """A stopped greedy run's divergence: a device call only where the outputs really part."""
        if all(a == b for a, b in zip(plain, spec)):
            return None
        return self.calls.divergence(asked, prompt_ids, plain, spec)

    def _side(
        self,
        asked: Request,
        stopped: Stopped,
        texts: TextTable,
        plain_ids=None,
        memory: RunMemory | None = None,
    ) -> Iterator[Packet]:
        """One side through the device (plain, or a drafter at the request's γ): its packets, the last one "end"
        unless it was stopped. Errors raise here, in the server, as the SpecvizError they were."""
        call = self.calls.decode(asked, plain_ids, memory)
        try:
            for packet in call:
                ended = take(packet, texts)
                yield packet
                if ended or stopped():
                    return
        finally:
            call.close()

    def sweep(
        self, values: Mapping, gammas=range(1, 9), stopped: Stopped = lambda: False, session: str = ""
    ) -> Iterator[SweepView]:
        """Plain once, then speculative at every γ on the current prompt; a view after each run. Every γ sees the
        session's earlier runs as they were before the sweep (its own runs are not remembered)."""
        asked = self._check(values, session)
        view = SweepView(gammas=tuple(gammas))
        with self.line.on_device(session, 1 + len(view.gammas), f"γ sweep of {1 + len(view.gammas)} runs"):
            for line in self._load(asked):
                view.message = line
                yield view
            memory = self.memories.of(session) if asked.remembers else None
            texts = TextTable()
            view.message = "plain decoding (the baseline)"
            yield view
            view.plain = [p.event for p in self._side(asked.plain(), stopped, texts) if p.kind == "step"]
            for gamma in view.gammas:
                if stopped():
                    break
                view.message = f"speculative decoding at γ = {gamma}"
                yield view
                at = replace(asked, settings=replace(asked.settings, gamma=gamma, adaptive=False))  # each fixed γ
                own = None if memory is None else memory.copy()
                view.runs[gamma] = [p.event for p in self._side(at, stopped, texts, None, own) if p.kind == "step"]
        view.finished = True
        view.stopped = stopped()
        view.message = "stopped" if view.stopped else "done"
        yield view

    def grand_prix(
        self,
        values: Mapping,
        lanes: str | list[str] | None = None,
        best: bool = True,
        stopped: Stopped = lambda: False,
        session: str = "",
        both_runtimes: bool = False,
    ) -> Iterator[GrandPrixView]:
        """Plain decoding and every lane (default: every drafter the app offers; `best`: each at its measured best γ,
        else at the request's) racing on one prompt in one device call, by the race's rule; a view after every step
        of any lane, the last one final. A lane that cannot run with this pair gets its reason and never holds the
        race. Each lane that copies from earlier runs drafts from the session's runs as they were; the race adds
        none. `both_runtimes`: every lane also on every other runtime that runs the pair on this device, beside its
        own plain decoding, the pair loaded there too."""
        asked = read_request({**values, "drafter": NO_DRAFTER}, self.shelf, session)
        settings = asked.settings
        view, chosen, runs = self._grid(asked, lanes, best)
        with self.line.on_device(
            session, (1 + len(runs)) * (1 + both_runtimes), f"Grand Prix of {1 + len(runs)} lanes"
        ):
            for line in self._load(asked):
                view.message = line
                yield view
            pair = self.shelf.current()
            others = ()
            if both_runtimes:
                others = others_for(pair.ask, pair.runs_on.name)
                for other in others:
                    for line in self.shelf.beside(other):
                        view.message = line
                        yield view
                view, chosen, runs = self._grid(asked, lanes, best, others)
                view.curves = {p.runs_on.name: in_forwards(p.target.forward_curve) for p in self._pairs(others)}
            view.runtime = pair.runs_on.name
            view.text_of = TextTable()
            batch_tables = self.level_tables.of(session, asked.pair)
            view.production = entrants_production(self.shelf.preset(asked.pair), asked, chosen, batch_tables, pair)
            memory = self.memories.of(session).copy() if any(run.remembers for run in runs) else None
            began = time.perf_counter()
            call = self.calls.grand_prix(asked, runs, memory, others)
            prompt_ids, end = yield from _relay(call, view, view.text_of, pair, (began, stopped), view.hear)
            view.stopped = bool(view.running())
            if end is None and settings.greedy:  # stopped before the device compared the lanes with plain
                for lane in view.drafted:
                    if lane.runs and lane.events:
                        lane.divergence = self._parted(asked, prompt_ids, view.plain.tokens, lane.tokens)
        view.finished = True
        view.wall_s = time.perf_counter() - began
        view.message = "stopped: every lane keeps what it wrote" if view.stopped else "done"
        view.trace = make_trace(
            kind=GRAND_PRIX,
            prompt=asked.prompt,
            prompt_ids=prompt_ids,
            settings=settings,
            models=pair.models(view.exact),
            sides=[Side(lane.name, lane.words, lane.events, lane.divergence) for lane in view.lanes],
            text_of=view.text_of,
            wall_s=view.wall_s,
            stopped=view.stopped,
            made_with="the app",
            extra={
                **view.record(),
                **recording(view.production),
                **({"runtime_curves": view.curves} if others else {}),
            },
        )
        yield view

    def _pairs(self, others) -> list:
        """The held pair and the pairs held beside it on `others`, where they have a measured curve."""
        found = [self.shelf.current(), *(self.shelf.beside_pair(r) for r in others)]
        return [p for p in found if p is not None and p.target.forward_curve]

    def _grid(self, asked: Request, lanes, best: bool, others=()):
        """A Grand Prix's lanes before the start (those that cannot run already done, with their reason), and the
        device's part of it: each runnable lane as it runs (its drafter, settings and options); with `others`, each
        lane again on each of those runtimes, beside its own plain decoding."""
        preset = self.shelf.preset(asked.pair)
        rules = entry_rules(asked, preset)
        chosen = lane_entrants(lanes, asked.settings, not best, rules)
        if others:
            chosen = across_runtimes(
                chosen, asked.settings, replace(rules, runtime=self.shelf.current().runs_on.name), others
            )
        view = starting_grid([lane_of(e) for e in chosen], asked.settings)
        return view, chosen, tuple(lane_runs(chosen))

    def _run_side(self, asked: Request, prompts, runnable: dict, memories, stopped, texts, models: RunModels):
        """How a workload's run goes through the device: one call per (prompt, side), at the side's own γ (memories
        as side_runner keeps them). `models` (the run's, as a trace and a report name them) learns from the device
        whether the target ran in exact mode."""

        def decode_one(i: int, side: str, plain_ids, memory):
            at = replace(asked, prompt=prompts[i])
            if side in runnable:
                at = replace(at, drafter=side, settings=runnable[side].settings, options=runnable[side].options)
            prompt_ids = []
            ended = False
            for packet in self._side(at, stopped, texts, plain_ids, memory):
                if packet.kind == "start":
                    prompt_ids = list(packet.prompt_ids)
                    models.exact = packet.exact
                ended = packet.kind == "end"
                if packet.kind == "step":
                    yield packet.event
                elif ended and packet.divergence is not None:
                    yield packet.divergence
            return prompt_ids if ended else None

        return side_runner(decode_one, memories)

    def workload(
        self,
        values: Mapping,
        prompts: list[str],
        drafters: list[str],
        fixed_gamma: bool,
        stopped: Stopped = lambda: False,
        session: str = "",
    ) -> Iterator[WorkloadView]:
        """Every chosen drafter on each of the visitor's prompts after one plain run of it, one device call per run
        (workload/run.py); the pair loaded once. A drafter that copies from earlier runs starts from the session's
        and learns from the workload's earlier prompts as it goes; the session's own memory is left as it was."""
        check_workload(prompts, GPU_LIMITS, 0, 1, 1)  # readable prompts, before any model is asked for anything
        asked = read_request({**values, "prompt": prompts[0], "drafter": NO_DRAFTER}, self.shelf, session)
        base = asked.settings
        preset = self.shelf.preset(asked.pair)
        chosen = entrants(drafter_names(drafters), base, fixed_gamma, entry_rules(asked, preset))
        view = WorkloadView(
            prompts=prompts,
            contenders=[e.contender for e in chosen],
            greedy=base.greedy,
            setting=setting_words(fixed_gamma, base),
            max_new_tokens=base.max_new_tokens,
        )
        runs = len(prompts) * (1 + sum(bool(e.settings) for e in chosen))
        with self.line.on_device(session, runs, f"workload of {runs} runs"):
            for line in self._load(asked):
                view.message = line
                yield view
            pair = self.shelf.current()
            view.text_of = TextTable()
            batch_tables = self.level_tables.of(session, asked.pair)
            view.production = entrants_production(preset, asked, chosen, batch_tables, pair, prompts[0])
            view.models = pair.models()
            runnable = {e.name: e for e in chosen if e.settings}
            read = sum(len(encode_prompt(pair.target, p)) for p in prompts)
            limits = limits_for(pair.target.device.type)
            check_workload(prompts, limits, read, 1 + len(runnable), base.max_new_tokens)
            if self.cluster:
                view.text_of = TokenTexts(pair.target.tokenizer)
                job = cluster_job(asked, pair, prompts, chosen, view)
                yield from run_on_cluster(view, partial(prepare, job), self.cluster, None, stopped)
                return
            memories = {n: self.memories.of(session).copy() for n in runnable if kind(n).remembers}
            run_side = self._run_side(asked, prompts, runnable, memories, stopped, view.text_of, view.models)
            yield from run_workload(view, run_side, stopped)


def _relay(call, view, texts: TextTable, pair, clock: tuple[float, Stopped], hear: Callable[[Packet], None]):
    """A device call's packets taken into `view` (the prompt's line when the call starts, every other packet by
    `hear`), the view yielded after each, until the call ends or `stopped()`; returns the prompt's ids and the call's
    end packet (None: stopped first). The call is closed either way: under ZeroGPU that ends the worker at its next
    step."""
    began, stopped = clock
    prompt_ids = []
    try:
        for packet in call:
            if take(packet, texts):
                return prompt_ids, packet
            if packet.kind == "start":
                prompt_ids = list(packet.prompt_ids)
                view.exact = packet.exact
                view.message = pair.prompt_line(len(prompt_ids), view.exact)
                continue
            hear(packet)
            view.wall_s = time.perf_counter() - began
            yield view
            if stopped():
                break
    finally:
        call.close()
    return prompt_ids, None
