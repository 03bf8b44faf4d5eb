"""The app's device side: loads pairs, runs the race and the γ sweep, explains divergences. Uses torch;
the UI only sees the pure-Python views of race.py and sweep.py."""

import copy
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import replace
from typing import Callable, Iterator

import torch

from ..drafters.kinds import DrafterKind, Options
from ..drafters.registry import PLAIN as NO_DRAFTER, decode, kind, kinds
from ..drafters.suffix_index import RunMemory
from ..errors import InvalidRequest, SpecvizError
from ..models import DTYPES, encode_prompt
from ..record import TokenTexts, divergence, make_trace
from ..settings import Settings
from ..trace import Side
from .compare import CompareView, Entry
from .race import PLAIN, SPEC, Lane, RaceRequest, RaceView, interleave, mode_text
from .shelf import LoadedPair, ModelShelf
from .sweep import SweepView

Stopped = Callable[[], bool]
SESSIONS_REMEMBERED = 64  # visitors whose earlier runs are kept for drafting (least recently active forgotten)
RUNS_REMEMBERED = 64  # earlier runs kept per visitor


class _Flag:  # the engine's StopFlag protocol over a callable
    def __init__(self, stopped: Stopped):
        self.is_set = stopped


class Backend:
    def __init__(self, shelf: ModelShelf):
        self.shelf = shelf
        self._running = 0  # generations under way on the device (the app lets one at a time in)
        self._count = threading.Lock()
        # Earlier runs per visitor, for drafters that copy from them. A run's rejected drafts are on screen, so one
        # visitor's runs must never be drafted from in another's session: each session has its own memory.
        self._memories: OrderedDict[str, RunMemory] = OrderedDict()

    def memory(self, session: str) -> RunMemory:
        """This visitor's earlier runs (made on first use; the least recently active visitor's are dropped)."""
        with self._count:
            found = self._memories.pop(session, None) or RunMemory(RUNS_REMEMBERED)
            self._memories[session] = found
            while len(self._memories) > SESSIONS_REMEMBERED:
                self._memories.popitem(last=False)
            return found

    def forget(self, session: str) -> None:
        """The visitor left: drop their earlier runs."""
        with self._count:
            self._memories.pop(session, None)

    def busy(self) -> str:
        """What a run started now would wait for, in words; empty when the device is free."""
        if self.shelf.loading:
            return f"waiting for the models to load: {self.shelf.loading}"
        if self._running:
            return "queued: another visitor's run has the device; yours starts when it ends"
        return ""

    @contextmanager
    def _on_device(self):
        with self._count:
            self._running += 1
        try:
            yield
        finally:
            with self._count:
                self._running -= 1

    def _check(self, request: RaceRequest) -> tuple[Settings, DrafterKind, Options]:
        """Everything checkable before a model loads: the settings, the drafter and its options (with what the pair
        brings, such as its Medusa heads), and whether the drafter has what it needs for the pair's target."""
        settings = request.settings()
        if request.drafter == NO_DRAFTER:
            raise InvalidRequest("the speculative side needs a drafter; 'none' is what the plain side runs")
        for other in kinds(menu_only=True):  # every option on the screen is checked, whichever drafter runs
            other.parse(request.options)
        chosen = kind(request.drafter)
        if not chosen.menu:  # the benchmark's measuring tools are not raced
            raise InvalidRequest(f"unknown drafter {request.drafter!r}")
        preset = self.shelf.preset(request.pair)
        options = chosen.parse({**request.options, **dict(preset.options)})
        chosen.check_for(options, preset.target)
        return settings, chosen, options

    def race(self, request: RaceRequest, stopped: Stopped = lambda: False, session: str = "") -> Iterator[RaceView]:
        """Views while loading, then after every decoding step of either side; the last one is final. The
        speculative side drafts from, and joins, the session's earlier runs."""
        with self._on_device():
            yield from self._race(request, stopped, self.memory(session))

    def sweep(self, request: RaceRequest, gammas=range(1, 9), stopped: Stopped = lambda: False,
              session: str = "") -> Iterator[SweepView]:
        """Plain once, then speculative at every γ on the current prompt; a view after each run. Every γ sees the
        session's earlier runs as they were before the sweep (its own runs are not remembered)."""
        with self._on_device():
            yield from self._sweep(request, gammas, stopped, self.memory(session))

    def compare(self, request: RaceRequest, stopped: Stopped = lambda: False, session: str = "") -> Iterator[CompareView]:
        """Plain decoding once, then every drafter the app offers with the same settings, one after the other; a view
        before and after each run. A drafter that cannot run with this pair (no heads, say) gets its reason instead.
        Like the sweep, each drafter sees the session's earlier runs as they were, and adds none."""
        with self._on_device():
            yield from self._compare(request, stopped, self.memory(session))

    def _load(self, request: RaceRequest) -> Iterator[str]:
        """The pair at the precisions asked for (the draft's: the target's unless the request names another)."""
        for precision in (request.dtype, request.draft_dtype):
            if precision not in DTYPES and precision != "same":
                raise InvalidRequest(f"precision must be one of {', '.join(DTYPES)}, got {precision!r}")
        draft_dtype = "" if request.draft_dtype == "same" else request.draft_dtype
        return self.shelf.load(request.pair, request.dtype, draft_dtype=draft_dtype)

    def _race(self, request: RaceRequest, stopped: Stopped, memory: RunMemory) -> Iterator[RaceView]:
        settings, chosen, options = self._check(request)
        for line in self._load(request):
            yield RaceView(Lane(PLAIN), Lane(SPEC), str, settings.greedy, message=line)
        pair = self.shelf.current()
        began = time.perf_counter()  # the race's wall clock starts once the models are in
        prompt_ids = encode_prompt(pair.target, request.prompt)
        target, stop = pair.target, _Flag(stopped)
        view = RaceView(Lane(PLAIN), Lane(SPEC), TokenTexts(target.tokenizer), settings.greedy,
                        message=f"prompt: {len(prompt_ids)} tokens; {pair.preset.label}, {_precision(pair)}",
                        mode=mode_text(chosen.words(options), settings), lossy=settings.lossy)
        sides = {
            PLAIN: decode(target, prompt_ids, settings, stop=stop),
            SPEC: decode(target, prompt_ids, settings, chosen.name, pair.draft, options, stop, memory),
        }
        with torch.inference_mode():
            for _ in interleave(sides, {PLAIN: view.plain, SPEC: view.spec}, stopped):
                view.wall_s = time.perf_counter() - began
                yield view
            view.stopped = not (view.plain.done and view.spec.done)
            if settings.greedy:
                view.divergence = divergence(target, prompt_ids, view.plain.tokens, view.spec.tokens, view.text_of)
        view.finished, view.wall_s = True, time.perf_counter() - began
        sides = [Side("plain", "", view.plain.events), Side(chosen.name, view.mode, view.spec.events, view.divergence)]
        view.trace = make_trace("race", request.prompt, prompt_ids, settings, _models(pair), sides, view.text_of,
                                view.wall_s, view.stopped, "the app")
        yield view

    def _sweep(self, request: RaceRequest, gammas, stopped: Stopped, memory: RunMemory) -> Iterator[SweepView]:
        settings, chosen, options = self._check(request)
        view = SweepView(gammas=tuple(gammas))
        for line in self._load(request):
            view.message = line
            yield view
        pair = self.shelf.current()
        prompt_ids = encode_prompt(pair.target, request.prompt)
        target, stop = pair.target, _Flag(stopped)
        with torch.inference_mode():
            view.message = "plain decoding (the baseline)"
            yield view
            view.plain = list(decode(target, prompt_ids, settings, stop=stop))
            for gamma in view.gammas:
                if stopped():
                    break
                view.message = f"speculative decoding at γ = {gamma}"
                yield view
                at = replace(settings, gamma=gamma, adaptive=False)  # the sweep measures each fixed γ
                view.runs[gamma] = list(decode(target, prompt_ids, at, chosen.name, pair.draft, options, stop,
                                               _snapshot(chosen, memory)))
        view.finished, view.stopped = True, stopped()
        view.message = "stopped" if view.stopped else "done"
        yield view

    def _compare(self, request: RaceRequest, stopped: Stopped, memory: RunMemory) -> Iterator[CompareView]:
        settings = request.settings()
        preset = self.shelf.preset(request.pair)
        entries = []
        for k in kinds(menu_only=True):
            options = k.parse({**request.options, **dict(preset.options)})
            try:
                k.check_for(options, preset.target)
                entries.append(Entry(k.name, mode_text(k.words(options), settings), options))
            except SpecvizError as exc:
                entries.append(Entry(k.name, k.label, options, note=f"not available: {exc}"))
        view = CompareView(entries, settings.greedy)
        for line in self._load(request):
            view.message = line
            yield view
        pair = self.shelf.current()
        began = time.perf_counter()
        prompt_ids = encode_prompt(pair.target, request.prompt)
        view.text_of, target, stop = TokenTexts(pair.target.tokenizer), pair.target, _Flag(stopped)
        with torch.inference_mode():
            view.message = "plain decoding (the baseline)"
            yield view
            view.plain = list(decode(target, prompt_ids, settings, stop=stop))
            for entry in [e for e in entries if not e.note]:
                if stopped():
                    break
                view.message = f"{entry.words.split(';')[0]}"
                yield view
                try:
                    entry.events = list(decode(target, prompt_ids, settings, entry.name, pair.draft, entry.options, stop,
                                               _snapshot(kind(entry.name), memory)))
                except SpecvizError as exc:  # e.g. a tree on a model whose attention takes no mask
                    entry.note = f"failed: {exc}"
                    continue
                if settings.greedy:
                    plain_ids = [t for e in view.plain for t in e.tokens]
                    entry.divergence = divergence(target, prompt_ids, plain_ids, entry.tokens, view.text_of)
        view.finished, view.stopped, view.wall_s = True, stopped(), time.perf_counter() - began
        view.message = "stopped" if view.stopped else "done"
        sides = [Side("plain", "", view.plain)] + [Side(e.name, e.words, e.events, e.divergence) for e in entries if e.events]
        view.trace = make_trace("comparison", request.prompt, prompt_ids, settings, _models(pair), sides, view.text_of,
                                view.wall_s, view.stopped, "the app")
        yield view


def _snapshot(chosen: DrafterKind, memory: RunMemory):
    """The session's earlier runs as they are now, for a run that must not add to them; copied only for a drafter
    that reads them."""
    return copy.deepcopy(memory) if chosen.remembers else None


def _models(pair: LoadedPair) -> dict:
    return {"pair": pair.preset.label, "target": pair.preset.target, "draft": pair.preset.draft,
            "precision": pair.dtype, "draft_precision": pair.draft_dtype, "device": pair.target.device.type}


def _precision(pair: LoadedPair) -> str:
    return pair.dtype if pair.draft_dtype in ("", pair.dtype) else f"{pair.dtype}, draft {pair.draft_dtype}"
