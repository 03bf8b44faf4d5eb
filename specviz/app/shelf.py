"""Target/draft pairs the app offers, and a shelf that keeps one pair loaded at a time."""

import gc
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from ..drafters.registry import build_drafter, kinds, published_options
from ..errors import InvalidRequest, OfflinePackageError, SpecvizError
from ..models.device import check_fits, heads_bytes, resolve_device, weight_bytes
from ..models.loading import check_loadable, check_precision, load_tokenizer
from ..models.offline import PRESETS, converted_path, locate_parts
from ..models.vocabulary import check_tokenizers_fit
from ..runs import Pair, choose_precision, choose_runtime, llama_plan_of, open_draft, open_gguf, open_target
from ..runtimes.choice import LLAMA_CPP, RUNTIMES, TRANSFORMERS, named
from ..settings import AUTO, Settings
from .loaded_pair import LoadedPair, held_bytes


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
    """Loads a pair once and keeps it; asking for another pair (or precision) frees the one before, once the new
    pair has passed every check that needs no weights. One pair is held at a time: a run names its pair, and a run
    that finds another pair loaded (another visitor switched) loads its own before it starts. Loads and runs take
    the device one at a time, so a switch never happens during a run."""

    def __init__(self, pairs: list[PairPreset], device: str = "auto", added_pairs: str = "on"):
        self.pairs = {p.label: p for p in pairs}
        self.device = device
        # Pairs a visitor names belong to their session (at most ADDED_PER_SESSION); `added_pairs` is "on", or why not.
        self.added_pairs = added_pairs
        self._added: dict[str, dict[str, PairPreset]] = {}  # session -> label -> pair
        self._loaded: LoadedPair | None = None
        self._lock = threading.Lock()
        self.loading = ""  # while a pair loads: what is loading, in words
        self.pinned = ""  # when set, the held pair is the only one: why, for anyone who asks for another
        self._beside: ModelShelf | None = None  # the held pair on another runtime, for a race comparing runtimes

    def pin(self, why: str) -> None:
        """Keep the held pair for good (ZeroGPU places weights on the GPU only at start-up): asking for another pair
        or precision, or adding one, is refused with `why`."""
        self.pinned = why

    def current(self) -> LoadedPair | None:
        return self._loaded

    def beside(self, runtime: str, report: Callable[[str], None] = lambda _: None) -> Iterator[str]:
        """The held pair's models on `runtime` too, for a race that compares runtimes: loaded once (yielding its
        progress lines) and kept beside the held pair until another pair is loaded; a pair whose other runtime reads
        other token ids is refused in one line."""
        held = self._loaded
        if held is None:
            raise InvalidRequest("a race comparing runtimes needs its pair loaded first")
        if held.target.runtime == runtime:
            raise InvalidRequest(f"the pair already runs on {runtime}; the other runtime is the one to compare")
        if self._beside is None:
            self._beside = ModelShelf([held.preset], self.device, "off")
        self._beside.pairs[held.preset.label] = held.preset
        yield from self._beside.load(held.preset.label, AUTO, report, runtime=runtime)
        other = self._beside.current()
        if other.target.tokenizer.get_vocab() != held.target.tokenizer.get_vocab():
            raise InvalidRequest(f"{held.preset.label} reads other token ids on {runtime}: the lanes could not race")

    def beside_pair(self, runtime: str) -> LoadedPair | None:
        """The held pair on `runtime`, where beside() loaded it for the held pair."""
        other = self._beside.current() if self._beside is not None else None
        held = self._loaded
        if other is None or held is None or other.preset != held.preset or other.target.runtime != runtime:
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

        pair = self._loaded
        lines = []
        brought = dict(pair.preset.options) if pair else {}
        for k in kinds(menu_only=True):
            options = k.parse(brought)
            if k.draft_needed(options) or not {s.name for s in k.options.specs() if s.pair_model} & set(brought):
                continue
            try:
                build_drafter(k.name, Settings(), None, pair.target, pair.draft, options)
                lines.append(f"loaded the {k.listing.label} of {pair.preset.label}")
            except SpecvizError as exc:
                lines.append(f"{k.name}: not available: {exc}")
        return lines

    def get(self, *asked, **named) -> LoadedPair:
        """The pair `load` is asked for (the same arguments), once it has loaded."""
        for _ in self.load(*asked, **named):
            pass
        return self._loaded

    def load(
        self,
        label: str,
        dtype: str,
        report: Callable[[str], None] = lambda _: None,
        draft_dtype: str = "",
        runtime: str = TRANSFORMERS,
    ) -> Iterator[str]:
        """Yield progress lines while loading; afterwards `current()` is the pair asked for. The draft's precision
        is the target's unless `draft_dtype` says otherwise. `runtime`: transformers, llama.cpp or auto (measured
        on this device, as the command line's --runtime); llama.cpp runs each GGUF's own quantisation, whatever the
        precisions asked."""
        if runtime != AUTO and runtime not in RUNTIMES:
            raise InvalidRequest(f"runtime must be one of {AUTO}, {', '.join(RUNTIMES)}, got {runtime!r}")
        preset = self.preset(label)
        with self._lock:
            held = self._loaded
            on_llama = runtime == LLAMA_CPP or (runtime == AUTO and dtype == AUTO)
            if held and held.preset == preset and held.asked_runtime == runtime and held.target.runtime == LLAMA_CPP:
                if on_llama:
                    return
            if self.pinned and not (held and held.preset == preset):
                raise InvalidRequest(self.pinned)
            began = time.perf_counter()
            try:
                self.loading = f"checking {preset.label}: which runtime runs it here"
                chosen = self._runtime(preset, runtime, dtype, report)
                if chosen.runtime == LLAMA_CPP:
                    fresh = yield from self._load_gguf(preset, held, chosen, runtime, report)
                else:
                    fresh = yield from self._load_transformers(preset, held, dtype, draft_dtype, report, chosen)
            finally:
                self.loading = ""
            if not fresh:
                return
            other = self._beside.current() if self._beside is not None else None
            if other is not None and other.preset != preset:  # the pair beside it was for the pair it replaced
                self._beside._loaded = None
            target = self._loaded.target
            draft = self._loaded.draft
            precision = self._loaded.precision_words()
            line = f"loaded {preset.label} ({precision}, {target.device.type}) in {time.perf_counter() - began:.1f} s"
            report(line)
            yield line
            for loaded in (target, draft):
                note = getattr(loaded.model, "specviz_load_note", "")
                if note:  # the pair runs one path: both models take the fallback
                    self._loaded.run_eagerly()
                    report(f"{loaded.name}: {note}")
                    yield f"{loaded.name}: {note}"

    def _runtime(self, preset: PairPreset, runtime: str, dtype: str, report):
        """The runtime for the pair: as asked, or measured (auto) unless a precision is named (transformers'); a
        pair llama.cpp cannot run is refused here, in one line, while the pair in use stays loaded."""
        if runtime == AUTO and dtype != AUTO:
            return named(TRANSFORMERS, f"transformers: the precision asked for, {dtype}, is one it runs")
        if runtime == TRANSFORMERS:
            return named(TRANSFORMERS, "transformers, as asked")
        return choose_runtime(preset.target, preset.draft, self.device, runtime, report)

    def _load_gguf(self, preset: PairPreset, held, chosen, asked: str, report) -> Iterator[str]:
        """The pair's GGUF files in llama.cpp (no conversion: the files as their packages ship them)."""
        files = [gguf_bytes(name) for name in (preset.target, preset.draft)]
        check_fits(list(zip((preset.target, preset.draft), files)), resolve_device(self.device), held_bytes(held))
        del held  # the caller's reference goes; _load_both lets go of the shelf's
        target, draft = yield from self._load_both(
            preset,
            "in llama.cpp ({}/2; its forward is measured once)",
            lambda: open_gguf(preset.target, report=report),
            lambda target: open_draft(target, preset.draft, "", self.device),
            report,
        )
        pair = Pair(target, draft)
        pair.runtime = chosen if chosen.plans else replace(chosen, plans={LLAMA_CPP: llama_plan_of(pair)})
        words = f"GGUF {target.model.describe()}"
        self._loaded = LoadedPair(
            target, draft, runtime=pair.runtime, preset=preset, dtype=words, asked=AUTO, asked_runtime=asked
        )
        self._loaded.choose_exact(False)
        return True

    def _load_both(self, preset: PairPreset, how: str, open_target, open_draft_of, report):
        """The target, then its draft, each said (on the load line and to `report`) before it loads; `how` tells how,
        with a {} for the step's number. The pair in use is let go first, so its memory is free for the new one.
        Returns (target, draft)."""
        self._loaded = None
        gc.collect()
        target = None
        for step, model in enumerate((f"target {preset.target}", f"draft {preset.draft}"), 1):
            line = f"loading {model} {how.format(step)}"
            self.loading = line
            report(line)
            yield line
            if step == 1:
                target = open_target()
            else:
                return target, open_draft_of(target)

    def _load_transformers(self, preset: PairPreset, held, dtype: str, draft_dtype: str, report, chosen):
        """The pair in transformers at the precisions asked (auto: measured from the configs, before anything is
        freed); what can fail before weights are read fails while the pair in use is still loaded, so a pair that
        cannot load (a Hub id with no network, a folder that is no model) costs nobody a reload."""
        asked = dtype
        choice = chosen.precision
        same_draft = held and held.draft_dtype == (draft_dtype or (held.dtype if asked == AUTO else dtype))
        if held and held.preset == preset and held.asked == asked and same_draft and held.target.runtime != LLAMA_CPP:
            return False
        if self.pinned:
            raise InvalidRequest(self.pinned)
        self.loading = f"checking {preset.label} (an offline model's first use converts it once, 1-2 min)"
        if asked == AUTO:
            choice = choice or choose_precision(preset.target, preset.draft, self.device, report)
            dtype = choice.dtype
        draft_dtype = draft_dtype or dtype
        where = [check_precision(precision, self.device) for precision in (dtype, draft_dtype)][0]
        found = [check_loadable(name) for name in (preset.target, preset.draft)]
        sizes = [
            (name, weight_bytes(source, precision, local_only=bool(offline)))
            for name, precision, (source, _, offline) in zip((preset.target, preset.draft), (dtype, draft_dtype), found)
        ]
        offline = bool(found[0][2])
        sizes += [(heads, heads_bytes(heads, dtype, offline)) for _, heads in preset.options]  # heads come too
        check_fits(sizes, where, freed=held_bytes(held))
        self.loading = f"checking the tokenizers of {preset.label}"
        tokenizers = [load_tokenizer(source, offline) for source, _, offline in found]
        check_tokenizers_fit(*tokenizers, preset.target, preset.draft)
        del held  # the caller's reference goes; _load_both lets go of the shelf's
        target, draft = yield from self._load_both(
            preset,
            "({}/2; the first load of an offline model converts it once, 1-2 min)",
            lambda: open_target(preset.target, dtype, self.device, tokenizers[0]),
            lambda target: open_draft(target, preset.draft, draft_dtype, self.device, tokenizers[1]),
            report,
        )
        self._loaded = LoadedPair(
            target, draft, choice=choice, runtime=chosen, preset=preset, dtype=dtype, draft_dtype=draft_dtype,
            asked=asked,
        )  # fmt: skip
        return True


def gguf_bytes(name: str) -> int:
    """A model's GGUF file size: what llama.cpp maps (an offline preset's joined once, a file as it is)."""
    from ..runtimes.llama_cpp.gguf_model import locate_gguf

    return locate_gguf(name).stat().st_size
