"""The app's server side: per-visitor memories, loading pairs, and turning the device's calls (device_calls.py)
into the pure-Python views of specviz/views/. Under ZeroGPU those calls run in a forked GPU
worker: the server sends a request and plain data, rebuilds each view from the packets that come back, keeps each
visitor's earlier runs itself, and stops a run by closing the call's generator (the worker ends at its next step)."""

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from .. import errors
from ..drafters.registry import NO_DRAFTER, kind
from ..drafters.suffix_index import RunMemory
from ..errors import InvalidRequest, SpecvizError
from ..events import PLAIN
from ..models import encode_prompt
from ..record import TextTable, make_trace
from ..render.grand_prix import ordinal
from ..request import RaceRequest
from ..settings import Settings
from ..trace import RunModels, Side
from ..views.grand_prix import KIND as GRAND_PRIX
from ..views.grand_prix import GrandPrixView, starting_grid
from ..views.race import SPEC, Lane, RaceView
from ..views.sweep import SweepView
from ..workload.entrants import drafter_names, entrants, lane_entrants, lane_of, setting_words
from ..workload.lanes import lane_runs
from ..workload.prompts import GPU_LIMITS, check_workload, limits_for
from ..workload.run import run_workload, side_runner
from ..workload.view import WorkloadView
from .device_calls import Asked, DeviceCalls, Packet, check_request
from .shelf import LoadedPair, ModelShelf

Stopped = Callable[[], bool]
# Visitors' earlier runs, kept for drafting, are bounded in tokens (about 800 bytes each with their index, measured):
# a visitor keeps at most VISITOR_TOKENS, all visitors together TOTAL_TOKENS (~400 MiB at worst); past either, the
# oldest runs and then the least recently active visitors are forgotten.
SESSIONS_REMEMBERED = 64
RUNS_REMEMBERED = 64  # earlier runs kept per visitor
VISITOR_TOKENS = 32_768
TOTAL_TOKENS = 524_288


class Backend:
    """`calls` is the device side: DeviceCalls over the same shelf, or its methods wrapped for a GPU worker (app.py)."""

    def __init__(self, shelf: ModelShelf, calls: DeviceCalls | None = None):
        self.shelf = shelf
        self.calls = calls or DeviceCalls(shelf)
        self._on: list[Ticket] = []  # runs under way on the device (the app lets one at a time in)
        self._line: list[Ticket] = []  # visitors' clicks waiting for the device, oldest first
        self._count = threading.Lock()
        # Earlier runs per visitor, for drafters that copy from them. A run's rejected drafts are on screen, so one
        # visitor's runs must never be drafted from in another's session: each session has its own memory.
        self._memories: OrderedDict[str, RunMemory] = OrderedDict()

    def memory(self, session: str) -> RunMemory:
        """This visitor's earlier runs (made on first use; the least recently active visitor's are dropped)."""
        with self._count:
            found = self._memories.pop(session, None) or RunMemory(RUNS_REMEMBERED, VISITOR_TOKENS)
            self._memories[session] = found
            while len(self._memories) > SESSIONS_REMEMBERED:
                self._memories.popitem(last=False)
            return found

    def remember(self, session: str, prompt_ids: list[int], output: list[int]) -> None:
        """A visitor's finished (or stopped) run joins their memory; past TOTAL_TOKENS in all, the least recently
        active other visitors' memories go."""
        memory = self.memory(session)
        memory.remember(prompt_ids, output)
        with self._count:
            total = sum(m.tokens for m in self._memories.values())
            for other in [s for s in self._memories if s != session]:  # least recently active first
                if total <= TOTAL_TOKENS:
                    break
                total -= self._memories.pop(other).tokens

    def forget(self, session: str) -> str:
        """The visitor left: drop their earlier runs. What the others' memories still hold, in words (for the log)."""
        with self._count:
            self._memories.pop(session, None)
            held = sum(m.tokens for m in self._memories.values())
            return (
                f"a visitor left (session {session[:8]}); {len(self._memories)} visitors' earlier runs hold "
                f"{held} tokens"
            )

    def wait_for_device(self, session: str, runs: int, what: str) -> None:
        """A click whose run will queue for the device: it takes its place in line (a Grand Prix of N lanes counts
        as N runs), until its run starts."""
        with self._count:
            self._line = [t for t in self._line if t.session != session] + [Ticket(session, runs, what)]

    def leave_line(self, session: str) -> None:
        """The session's click no longer waits (its run ended, or failed before it reached the device)."""
        with self._count:
            self._line = [t for t in self._line if t.session != session]

    def in_line(self, session: str) -> bool:
        """Whether the session's click still waits for the device."""
        with self._count:
            return any(t.session == session for t in self._line)

    def busy(self, session: str = "") -> str:
        """What a run started now (or the session's run waiting in line) would wait for, in words: its place in line
        and the runs ahead of it; empty when the device is free."""
        if self.shelf.loading:
            return f"waiting for the models to load: {self.shelf.loading}"
        with self._count:
            mine = next((i for i, t in enumerate(self._line) if t.session == session), len(self._line))
            on, before = [t for t in self._on if t.session != session], self._line[:mine]
        if not on and not before:
            return ""
        runs, place = sum(t.runs for t in on + before), len(before) + 1
        now = f"another visitor's {on[0].what} has the device" if on else "the device is being handed on"
        return (
            f"queued: {ordinal(place)} in line, {runs} run{'s' * (runs != 1)} ahead of yours ({now}); "
            "yours starts when they end"
        )

    @contextmanager
    def _on_device(self, session: str = "", runs: int = 1, what: str = "run"):
        """A run holds the device: its ticket leaves the line."""
        ticket = Ticket(session, runs, what)
        self.leave_line(session)
        with self._count:
            self._on.append(ticket)
        try:
            yield
        finally:
            with self._count:
                self._on.remove(ticket)

    def _check(self, request: RaceRequest, session: str) -> Asked:
        """A race's or a sweep's request checked, once: its speculative side needs a drafter, and its pair is a
        preset or one this visitor added, never another's."""
        if request.drafter == NO_DRAFTER:
            raise InvalidRequest("the speculative side needs a drafter; 'none' is what the plain side runs")
        return check_request(request, self.shelf, session)

    def _load(self, asked: Asked) -> Iterator[str]:
        """The pair at the precisions asked for (the draft's: the target's unless the request named another)."""
        return self.shelf.load(asked.pair, asked.dtype, draft_dtype=asked.draft_dtype)

    def race(self, request: RaceRequest, stopped: Stopped = lambda: False, session: str = "") -> Iterator[RaceView]:
        """Views while loading, then after every decoding step of either side; the last one is final. The
        speculative side drafts from, and joins, the session's earlier runs."""
        asked = self._check(request, session)
        settings = asked.settings
        with self._on_device(session, 2, "race"):
            for line in self._load(asked):
                yield RaceView(plain=Lane(PLAIN), spec=Lane(SPEC), text_of=str, greedy=settings.greedy, message=line)
            pair, texts = self.shelf.current(), TextTable()
            memory = self.memory(session) if asked.remembers else None
            view = RaceView(
                plain=Lane(PLAIN),
                spec=Lane(SPEC),
                text_of=texts,
                greedy=settings.greedy,
                mode=asked.mode,
                lossy=settings.lossy,
            )
            lanes, began, prompt_ids, compared = {PLAIN: view.plain, SPEC: view.spec}, time.perf_counter(), [], False
            call = self.calls.race(asked, None if memory is None else memory.copy())
            try:
                for packet in call:
                    ended = _take(packet, texts)
                    if packet.kind == "start":
                        prompt_ids, view.exact = list(packet.prompt_ids), packet.exact
                        view.message = (
                            f"prompt: {len(prompt_ids)} tokens; {pair.preset.label}, {_precision(pair)}; {view.exact}"
                        )
                        continue
                    if packet.kind == "step":
                        lanes[packet.lane].add(packet.event)
                    elif ended:
                        view.divergence, compared = packet.divergence, True
                        break
                    view.wall_s = time.perf_counter() - began
                    yield view
                    if stopped():
                        break
            finally:
                call.close()  # under ZeroGPU this ends the worker at its next step
            view.stopped = not (view.plain.done and view.spec.done)
            if not compared and settings.greedy:  # stopped before the device compared the two sides
                view.divergence = self._parted(asked, prompt_ids, view.plain.tokens, view.spec.tokens)
            if memory is not None and prompt_ids:  # the run joins the visitor's memory, as far as it went
                self.remember(session, prompt_ids, view.spec.tokens)
        view.finished, view.wall_s = True, time.perf_counter() - began
        sides = [Side(PLAIN, "", view.plain.events), Side(asked.drafter, view.mode, view.spec.events, view.divergence)]
        view.trace = make_trace(
            kind="race",
            prompt=asked.prompt,
            prompt_ids=prompt_ids,
            settings=settings,
            models=_models(pair, view.exact),
            sides=sides,
            text_of=texts,
            wall_s=view.wall_s,
            stopped=view.stopped,
            made_with="the app",
        )
        yield view

    def _parted(self, asked: Asked, prompt_ids: list[int], plain: list[int], spec: list[int]):
        """A stopped greedy run's divergence: a device call only where the outputs really part."""
        if all(a == b for a, b in zip(plain, spec)):
            return None
        return self.calls.divergence(asked, prompt_ids, plain, spec)

    def _side(
        self,
        asked: Asked,
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
                ended = _take(packet, texts)
                yield packet
                if ended or stopped():
                    return
        finally:
            call.close()

    def sweep(
        self, request: RaceRequest, gammas=range(1, 9), stopped: Stopped = lambda: False, session: str = ""
    ) -> Iterator[SweepView]:
        """Plain once, then speculative at every γ on the current prompt; a view after each run. Every γ sees the
        session's earlier runs as they were before the sweep (its own runs are not remembered)."""
        asked = self._check(request, session)
        view = SweepView(gammas=tuple(gammas))
        with self._on_device(session, 1 + len(view.gammas), f"γ sweep of {1 + len(view.gammas)} runs"):
            for line in self._load(asked):
                view.message = line
                yield view
            memory, texts = self.memory(session) if asked.remembers else None, TextTable()
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
        view.finished, view.stopped = True, stopped()
        view.message = "stopped" if view.stopped else "done"
        yield view

    def grand_prix(
        self,
        request: RaceRequest,
        lanes: str | list[str] | None = None,
        best: bool = True,
        stopped: Stopped = lambda: False,
        session: str = "",
    ) -> Iterator[GrandPrixView]:
        """Plain decoding and every lane (default: every drafter the app offers; `best`: each at its measured best γ,
        else at the request's) racing on one prompt in one device call, by the race's rule; a view after every step
        of any lane, the last one final. A lane that cannot run with this pair gets its reason and never holds the
        race. Each lane that copies from earlier runs drafts from the session's runs as they were; the race adds
        none."""
        asked = check_request(replace(request, drafter=NO_DRAFTER), self.shelf, session)
        settings = asked.settings
        view, runs = self._grid(request, settings, lanes, best, session)
        with self._on_device(session, 1 + len(runs), f"Grand Prix of {1 + len(runs)} lanes"):
            for line in self._load(asked):
                view.message = line
                yield view
            pair, view.text_of = self.shelf.current(), TextTable()
            memory = self.memory(session).copy() if any(run.remembers for run in runs) else None
            began, prompt_ids, compared = time.perf_counter(), [], False
            call = self.calls.grand_prix(asked, runs, memory)
            try:
                for packet in call:
                    if _take(packet, view.text_of):
                        compared = True
                        break
                    if packet.kind == "start":
                        prompt_ids, view.exact = list(packet.prompt_ids), packet.exact
                        view.message = (
                            f"prompt: {len(prompt_ids)} tokens; {pair.preset.label}, {_precision(pair)}; {view.exact}"
                        )
                        continue
                    view.hear(packet)
                    view.wall_s = time.perf_counter() - began
                    yield view
                    if stopped():
                        break
            finally:
                call.close()  # under ZeroGPU this ends the worker at its next step
            view.stopped = bool(view.running())
            if not compared and settings.greedy:  # stopped before the device compared the lanes with plain
                for lane in view.drafted:
                    if lane.runs and lane.events:
                        lane.divergence = self._parted(asked, prompt_ids, view.plain.tokens, lane.tokens)
        view.finished, view.wall_s = True, time.perf_counter() - began
        view.message = "stopped: every lane keeps what it wrote" if view.stopped else "done"
        view.trace = make_trace(
            kind=GRAND_PRIX,
            prompt=asked.prompt,
            prompt_ids=prompt_ids,
            settings=settings,
            models=_models(pair, view.exact),
            sides=[Side(lane.name, lane.words, lane.events, lane.divergence) for lane in view.lanes],
            text_of=view.text_of,
            wall_s=view.wall_s,
            stopped=view.stopped,
            made_with="the app",
            extra=view.record(),
        )
        yield view

    def _grid(self, request: RaceRequest, settings: Settings, lanes, best: bool, session: str):
        """A Grand Prix's lanes before the start (those that cannot run already done, with their reason), and the
        device's part of it: each runnable lane as it runs (its drafter, settings and options)."""
        preset = self.shelf.preset(request.pair, session)
        chosen = lane_entrants(
            lanes,
            settings,
            not best,
            lambda k: k.parse({**request.options, **dict(preset.options)}),
            preset.target,
            bool(preset.draft),
        )
        view = starting_grid([lane_of(e) for e in chosen], settings)
        return view, tuple(lane_runs(chosen))

    def _run_side(self, asked: Asked, prompts, runnable: dict, memories, stopped, texts, models: RunModels):
        """How a workload's run goes through the device: one call per (prompt, side), at the side's own γ (memories
        as side_runner keeps them). `models` (the run's, as a trace and a report name them) learns from the device
        whether the target ran in exact mode."""

        def decode_one(i: int, side: str, plain_ids, memory):
            at = replace(asked, prompt=prompts[i])
            if side in runnable:
                at = replace(at, drafter=side, settings=runnable[side].settings, options=runnable[side].options)
            prompt_ids, ended = [], False
            for packet in self._side(at, stopped, texts, plain_ids, memory):
                if packet.kind == "start":
                    prompt_ids, models.exact = list(packet.prompt_ids), packet.exact
                ended = packet.kind == "end"
                if packet.kind == "step":
                    yield packet.event
                elif ended and packet.divergence is not None:
                    yield packet.divergence
            return prompt_ids if ended else None

        return side_runner(decode_one, memories)

    def workload(
        self,
        request: RaceRequest,
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
        asked = check_request(replace(request, prompt=prompts[0], drafter=NO_DRAFTER), self.shelf, session)
        base, preset = asked.settings, self.shelf.preset(request.pair, session)
        chosen = entrants(
            drafter_names(drafters),
            base,
            fixed_gamma,
            lambda k: k.parse({**request.options, **dict(preset.options)}),
            preset.target,
            bool(preset.draft),
        )
        view = WorkloadView(
            prompts=prompts,
            contenders=[e.contender for e in chosen],
            greedy=base.greedy,
            setting=setting_words(fixed_gamma, base),
            max_new_tokens=base.max_new_tokens,
        )
        runs = len(prompts) * (1 + sum(bool(e.settings) for e in chosen))
        with self._on_device(session, runs, f"workload of {runs} runs"):
            for line in self._load(asked):
                view.message = line
                yield view
            pair, view.text_of = self.shelf.current(), TextTable()
            view.models, runnable = _models(pair), {e.name: e for e in chosen if e.settings}
            read = sum(len(encode_prompt(pair.target, p)) for p in prompts)
            limits = limits_for(pair.target.device.type)
            check_workload(prompts, limits, read, 1 + len(runnable), base.max_new_tokens)
            memories = {n: self.memory(session).copy() for n in runnable if kind(n).remembers}
            run_side = self._run_side(asked, prompts, runnable, memories, stopped, view.text_of, view.models)
            yield from run_workload(view, run_side, stopped)


@dataclass(frozen=True, eq=False)
class Ticket:
    session: str
    runs: int  # sides that decode the whole budget: 2 for a race, N for a Grand Prix of N lanes
    what: str  # "race", "Grand Prix of 9 lanes", ...


def _take(packet: Packet, texts: TextTable) -> bool:
    """Keep a packet's token texts; raise the SpecvizError it carries; True once the call has ended."""
    if packet.kind == "error":
        raise getattr(errors, packet.error, SpecvizError)(packet.message)
    texts.update(packet.texts)
    return packet.kind == "end"


def _models(pair: LoadedPair, exact: str = "") -> RunModels:
    """The run's models; `exact` is filled in from the device's answer."""
    return RunModels(
        target=pair.preset.target,
        draft=pair.preset.draft,
        pair=pair.preset.label,
        precision=pair.dtype,
        draft_precision=pair.draft_dtype,
        device=pair.target.device.type,
        exact=exact,
    )


def _precision(pair: LoadedPair) -> str:
    return pair.dtype if pair.draft_dtype in ("", pair.dtype) else f"{pair.dtype}, draft {pair.draft_dtype}"
