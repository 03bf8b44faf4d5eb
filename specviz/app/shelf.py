"""Target/draft pairs the app offers, and a shelf that keeps the pair in use loaded, and the same pair on each other
runtime it was loaded on."""

import gc
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from ..drafters.registry import build_drafter, kinds, published_options
from ..errors import InvalidRequest, OfflinePackageError, SpecvizError
from ..models.offline import PRESETS, converted_path, locate_parts
from ..runtimes import runtime_registry as registry
from ..runtimes.pair import Pair, PairAsk, load_pair, prepare_pair
from ..runtimes.runtime import SAME
from ..settings import AUTO, Settings


@dataclass(frozen=True)
class PairPreset:
    label: str
    target: str  # offline preset, folder or Hub id: anything load_model takes
    draft: str
    options: tuple[tuple[str, str], ...] = ()  # (option, location) of the models it brings (OptionSpec.pair_model)

    def offline_ready(self) -> bool:
        """True when both models come from offline packages that are installed (or already converted)."""
        for name in (self.target, self.draft):
            if name not in PRESETS:
                return False
            if not (converted_path(PRESETS[name]) / "config.json").is_file():
                try:
                    locate_parts(PRESETS[name])
                except OfflinePackageError:
                    return False
        return True


OFFLINE_QWEN = PairPreset(
    "Qwen2.5-Coder 1.5B ← 0.5B (offline, CPU)", "qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct"
)
# A draft with another tokenizer (49,152 ids against Qwen's 151,936): bridged through text
# (drafters/cross_tokenizer.py).
OFFLINE_CROSS = PairPreset(
    "Qwen2.5-Coder 1.5B ← SmolLM2 135M (offline, CPU, another tokenizer)",
    "qwen2.5-coder-1.5b-instruct",
    "smollm2-135m-instruct",
)
# The DFlash paper's target: Qwen3-4B with z-lab's published DFlash drafter (block 16), AngelSlim's published EAGLE-3
# head and Qwen3-0.6B as a draft model (the drafters' options declare the heads), thinking off in the chat template.
QWEN3_DFLASH = PairPreset(
    "Qwen3 4B ← 0.6B, DFlash and EAGLE-3 heads (Hub, GPU)",
    "Qwen/Qwen3-4B",
    "Qwen/Qwen3-0.6B",
    options=published_options("Qwen/Qwen3-4B"),
)
HUB_PAIRS = (
    QWEN3_DFLASH,
    PairPreset("Qwen2.5 7B ← 0.5B (Hub, GPU)", "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
    PairPreset("Qwen2.5 1.5B ← 0.5B (Hub)", "Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
    PairPreset(
        "SmolLM2 1.7B ← 135M (Hub)", "HuggingFaceTB/SmolLM2-1.7B-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct"
    ),
    # The heads published for Vicuna-7B v1.3 (Medusa-1's and EAGLE's, as their drafters declare them), with a 68M
    # Llama drafter for Vicuna.
    PairPreset(
        "Vicuna 7B ← 68M, Medusa and EAGLE heads (Hub, GPU)",
        "lmsys/vicuna-7b-v1.3",
        "double7/vicuna-68m",
        options=published_options("lmsys/vicuna-7b-v1.3"),
    ),
)


def default_pairs(gpu: bool, custom: PairPreset | None = None) -> list[PairPreset]:
    """The presets in menu order; the first is the default: a custom pair, else the GPU pair on a GPU,
    else the offline pair when its packages are installed, else the smallest Hub pair."""
    pairs = [OFFLINE_QWEN, OFFLINE_CROSS, *HUB_PAIRS]
    if gpu:
        pairs = [*HUB_PAIRS, OFFLINE_QWEN, OFFLINE_CROSS]
    elif not OFFLINE_QWEN.offline_ready():
        small = [p for p in HUB_PAIRS if "GPU" not in p.label][::-1]  # the smallest first, the GPU pairs after
        pairs = [*small, *(p for p in HUB_PAIRS if p not in small), OFFLINE_QWEN, OFFLINE_CROSS]
    return [custom, *pairs] if custom else pairs


ADDED_PER_SESSION = 4


class ModelShelf:
    """Loads pairs and keeps them: the pair in use, and the same preset's pair on every other runtime it was loaded on,
    so that switching the runtime away and back loads nothing, and a race on every runtime runs on what is held.
    Asking for another pair (or another precision on a runtime) lets go of the pairs it replaces, once the new one has
    passed every check that needs no weights. A run names its pair, and a run that finds another pair in use (another
    visitor switched) loads its own before it starts. Loads and runs take the device one at a time, so a switch never
    happens during a run."""

    def __init__(self, pairs: list[PairPreset], device: str = "auto", added_pairs: str = "on", runtimes=()):
        self.pairs = {p.label: p for p in pairs}
        self.device = device
        # what a run may name: auto (where several run here) and each runtime, the first what a run names by default
        self.runtimes = tuple(runtimes or registry.offered(device))
        # Pairs a visitor names belong to their session (at most ADDED_PER_SESSION); `added_pairs` is "on", or why not.
        self.added_pairs = added_pairs
        self._added: dict[str, dict[str, PairPreset]] = {}  # session -> label -> pair
        self._held: dict[str, Pair] = {}  # runtime -> the pair loaded on it: all of one preset
        self._in_use = ""  # the runtime of the pair in use
        self._lock = threading.Lock()
        self.loading = ""  # while a pair loads: what is loading, in words
        self.pinned = ""  # when set, the held pair is the only one: why, for anyone who asks for another

    def pin(self, why: str) -> None:
        """Keep the held pair for good (ZeroGPU places weights on the GPU only at start-up): asking for another pair
        or precision, or adding one, is refused with `why`."""
        self.pinned = why

    def runtime_named(self, name: str):
        """The runtime `name` names (runtimes/runtime.Runtime); None for auto, chosen when a pair loads."""
        return registry.chosen_or_none(name)

    def current(self) -> Pair | None:
        return self._held.get(self._in_use)

    def beside(self, runtime_name: str, report: Callable[[str], None] = lambda _: None) -> Iterator[str]:
        """The pair in use on `runtime_name` too, for a race on several runtimes: loaded once (yielding its progress
        lines) and kept until another pair is loaded; a pair whose other runtime reads other token ids is refused in
        one line."""
        held = self.current()
        if held is None:
            raise InvalidRequest("a race comparing runtimes needs its pair loaded first")
        if held.runs_on.name == runtime_name:
            raise InvalidRequest(f"the pair already runs on {runtime_name}; the other runtime is the one to compare")
        ask = replace(held.ask, runtime=runtime_name, dtype=AUTO, draft_dtype="", insists=False)
        yield from self._load(ask, report, in_use=False)
        other = self._held[runtime_name]
        if other.target.tokenizer.get_vocab() != held.target.tokenizer.get_vocab():
            raise InvalidRequest(f"{held.name} reads other token ids on {runtime_name}: the lanes could not race")

    def beside_pair(self, runtime_name: str) -> Pair | None:
        """The pair in use as it is held on `runtime_name` (another runtime), where beside() loaded it."""
        held = self.current()
        other = self._held.get(runtime_name)
        if held is None or other is None or other is held or other.name != held.name:
            return None
        return other

    def add(self, target: str, draft: str, session: str = "") -> str:
        """A pair of any target and any draft, by name (offline preset, folder or Hub id), added to this session's
        menu; its label. Nothing loads yet: the first run with it loads it, or says in one line why it cannot."""
        if self.pinned:
            raise InvalidRequest(self.pinned)
        if self.added_pairs != "on":
            raise InvalidRequest(self.added_pairs)
        target = str(target or "").strip()
        draft = str(draft or "").strip()
        if not target or not draft:
            raise InvalidRequest("name both a target and a draft (an offline preset, a model folder or a Hub id)")
        preset = PairPreset(f"{target} ← {draft}", target, draft)
        if preset.label in self.pairs:
            return preset.label
        own = self._added.setdefault(session, {})
        if preset.label not in own and len(own) >= ADDED_PER_SESSION:
            raise InvalidRequest(f"a session adds at most {ADDED_PER_SESSION} pairs; reload the page to start afresh")
        own[preset.label] = preset
        return preset.label

    def choices(self, session: str = "") -> list[str]:
        """The menu one visitor sees: the presets, then the pairs they added."""
        return [*self.pairs, *self._added.get(session, {})]

    def forget(self, session: str) -> None:
        """The visitor left: the pairs they added go (a loaded one stays loaded until another is asked for)."""
        self._added.pop(session, None)

    def preset(self, label: str, session: str | None = None) -> PairPreset:
        """A preset, or a pair the session added; with no session (the device side, after the server has checked
        the visitor's request), a pair any session added. An unknown label's error lists only what the asker may
        choose."""
        if not isinstance(label, str):
            raise InvalidRequest(f"a model pair is named by its label (text), not {type(label).__name__} {label!r}")
        if label in self.pairs:
            return self.pairs[label]
        added = (
            self._added.get(session, {})
            if session is not None
            else {k: v for own in self._added.values() for k, v in own.items()}
        )
        if label in added:
            return added[label]
        mine = self.choices(session) if session is not None else list(self.pairs)
        raise InvalidRequest(f"unknown model pair {label!r}; choose one of: {', '.join(mine)}")

    def load_heads(self) -> list[str]:
        """Load now every model the held pair brings for a drafter (Medusa, EAGLE, DFlash heads), kept with its target
        as a run would load it. Under ZeroGPU each GPU call runs in a process forked from the server and what it loads
        dies with it, so heads loaded before launch are the only ones a race does not read again. One line each: what
        loaded, or why it could not (the race will say so too)."""

        pair = self.current()
        lines = []
        brought = dict(pair.ask.brings) if pair else {}
        for k in kinds(menu_only=True):
            options = k.parse(brought)
            if k.draft_needed(options) or not {s.name for s in k.options.specs() if s.pair_model} & set(brought):
                continue
            try:
                build_drafter(k.name, Settings(), None, pair.target, pair.draft, options)
                lines.append(f"loaded the {k.listing.label} of {pair.name}")
            except SpecvizError as exc:
                lines.append(f"{k.name}: not available: {exc}")
        return lines

    def get(self, *asked, **named) -> Pair:
        """The pair `load` is asked for (the same arguments), once it has loaded."""
        for _ in self.load(*asked, **named):
            pass
        return self.current()

    def load(
        self,
        label: str,
        dtype: str,
        report: Callable[[str], None] = lambda _: None,
        draft_dtype: str = "",
        runtime: str = AUTO,
    ) -> Iterator[str]:
        """Yield progress lines while loading; afterwards `current()` is the pair asked for. The draft's precision is
        the target's unless `draft_dtype` names one. `runtime`: a runtime's name, or auto (measured on this
        device, as the command line's --runtime); a runtime without precisions runs each model's file as it ships,
        whatever the precisions asked, and under auto a precision named goes to a runtime that has it."""
        preset = self.preset(label)
        if runtime != AUTO:
            registry.runtime(runtime)  # an unknown runtime is one line, before anything else
        ask = PairAsk(
            preset.target,
            preset.draft,
            runtime,
            dtype,
            draft_dtype or SAME,
            insists=runtime == AUTO and dtype != AUTO,
            device=self.device,
            label=preset.label,
            brings=preset.options,
        )
        yield from self._load(ask, report, in_use=True)

    def _answering(self, ask: PairAsk) -> Pair | None:
        return next((p for p in self._held.values() if p.answers(ask)), None)

    def _load(self, ask: PairAsk, report, in_use: bool) -> Iterator[str]:
        """The pair `ask` names: the held one that answers it, else checked (while the pairs in use stay), then the
        pairs it replaces let go, then loaded."""
        with self._lock:
            held = self._answering(ask)
            if held is None and self.pinned:
                raise InvalidRequest(self.pinned)
            began = time.perf_counter()
            try:
                if held is None:
                    self.loading = f"checking {ask.name}: which runtime runs it here"
                    choice = registry.choose(ask, report)
                    held = self._answering(replace(ask, runtime=choice.runtime))
                if held is None:
                    self.loading = f"checking {ask.name} on {choice.runtime}"
                    replaced = [r for r, p in self._held.items() if r == choice.runtime or p.name != ask.name]
                    freed = sum(self._held[r].weight_bytes() for r in replaced)
                    ready = prepare_pair(ask, report, freed, choice)
                    for gone in replaced:  # let go before the new weights are read: their memory is the new pair's
                        del self._held[gone]
                    gc.collect()
                    held = yield from self._said(load_pair(ready), report)
                    self._held[held.runs_on.name] = held
                    yield from self._loaded(held, time.perf_counter() - began, report)
            finally:
                self.loading = ""
            if in_use:
                self._in_use = held.runs_on.name

    def _said(self, loading: Iterator[str], report):
        """The lines of a load as they come, each on the load line and to `report` too; returns the loaded pair."""
        while True:
            try:
                self.loading = next(loading)
            except StopIteration as done:
                return done.value
            report(self.loading)
            yield self.loading

    def _loaded(self, pair: Pair, seconds: float, report) -> Iterator[str]:
        line = f"loaded {pair.name} ({pair.precision_words()}, {pair.target.device.type}) on {pair.runs_on.name} in "
        line += f"{seconds:.1f} s"
        report(line)
        yield line
        for model in pair.loaded():
            if model.load_note:  # the pair runs one path: both models take the fallback
                pair.run_eagerly()
                report(f"{model.name}: {model.load_note}")
                yield f"{model.name}: {model.load_note}"
