"""Target/draft pairs the app offers, and a shelf that keeps one pair loaded at a time."""

import gc
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..drafters.registry import build_drafter, kinds, published_options
from ..errors import InvalidRequest, OfflinePackageError, SpecvizError
from ..models.device import check_fits, heads_bytes, weight_bytes
from ..models.loading import check_loadable, check_precision, load_tokenizer
from ..models.offline import PRESETS, converted_path, locate_parts
from ..models.vocabulary import check_tokenizers_fit
from ..runs import Pair, choose_precision, open_draft, open_target
from ..settings import AUTO, Settings
from ..trace import RunModels


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


@dataclass(kw_only=True)
class LoadedPair(Pair):
    """A preset's pair as the shelf holds it; what drafters load for its target (Medusa heads) is kept with the
    target (LoadedModel.companions)."""

    preset: PairPreset
    dtype: str  # the target's precision
    draft_dtype: str = ""  # the draft's precision
    asked: str = ""  # the precision asked for: `dtype`, or "auto" (measured: `choice` says what and why)

    def precision_words(self) -> str:
        """The pair's precisions in a few words, with how the target's was chosen."""
        words = self.dtype if self.draft_dtype in ("", self.dtype) else f"{self.dtype}, draft {self.draft_dtype}"
        return words + (" (auto: measured fastest on this device)" if self.choice else "")

    def prompt_line(self, prompt_tokens: int, exact: str) -> str:
        """What a run says when it starts: the prompt's length, the pair, its precisions, exact mode."""
        return f"prompt: {prompt_tokens} tokens; {self.preset.label}, {self.precision_words()}; {exact}"

    def models(self, exact: str = "") -> RunModels:
        """The run's models as a trace records them; `exact` is filled in from the device's answer."""
        return RunModels(
            target=self.preset.target,
            draft=self.preset.draft,
            pair=self.preset.label,
            precision=self.dtype,
            draft_precision=self.draft_dtype,
            device=self.target.device.type,
            exact=exact,
        )

    def run_eagerly(self) -> None:
        """Both models on the eager, dynamic-cache path: a pair runs one path, so a fast-path failure of either
        turns it off for both."""
        self.target.model.specviz_static = self.draft.model.specviz_static = False


def held_bytes(pair: LoadedPair | None) -> int:
    """The bytes of a loaded pair's weights: what loading another pair in its place frees."""
    if pair is None:
        return 0
    return sum(p.numel() * p.element_size() for m in (pair.target, pair.draft) for p in m.model.parameters())


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

    def pin(self, why: str) -> None:
        """Keep the held pair for good (ZeroGPU places weights on the GPU only at start-up): asking for another pair
        or precision, or adding one, is refused with `why`."""
        self.pinned = why

    def current(self) -> LoadedPair | None:
        return self._loaded

    def add(self, target: str, draft: str, session: str = "") -> str:
        """A pair of any target and any draft, by name (offline preset, folder or Hub id), added to this session's
        menu; its label. Nothing loads yet: the first run with it loads it, or says in one line why it cannot."""
        if self.pinned:
            raise InvalidRequest(self.pinned)
        if self.added_pairs != "on":
            raise InvalidRequest(self.added_pairs)
        target, draft = str(target or "").strip(), str(draft or "").strip()
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

        pair, lines = self._loaded, []
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

    def get(
        self, label: str, dtype: str, report: Callable[[str], None] = lambda _: None, draft_dtype: str = ""
    ) -> LoadedPair:
        for _ in self.load(label, dtype, report, draft_dtype):
            pass
        return self._loaded

    def load(
        self, label: str, dtype: str, report: Callable[[str], None] = lambda _: None, draft_dtype: str = ""
    ) -> Iterator[str]:
        """Yield progress lines while loading; afterwards `current()` is the pair asked for. The draft's precision
        is the target's unless `draft_dtype` says otherwise."""
        preset = self.preset(label)
        asked, choice = dtype, None
        with self._lock:
            held = self._loaded
            same_draft = held and held.draft_dtype == (draft_dtype or (held.dtype if asked == AUTO else dtype))
            if held and held.preset == preset and held.asked == asked and same_draft:
                return
            if self.pinned:
                raise InvalidRequest(self.pinned)
            began = time.perf_counter()
            try:
                # What can fail before weights are read fails while the pair in use is still loaded, so a pair
                # that cannot load (a Hub id with no network, a folder that is no model) costs nobody a reload.
                self.loading = f"checking {preset.label} (an offline model's first use converts it once, 1-2 min)"
                if asked == AUTO:  # measured (or read back) from the configs alone, before anything is freed
                    choice = choose_precision(preset.target, preset.draft, self.device, report)
                    dtype = choice.dtype
                draft_dtype = draft_dtype or dtype
                where = [check_precision(precision, self.device) for precision in (dtype, draft_dtype)][0]
                found = [check_loadable(name) for name in (preset.target, preset.draft)]
                sizes = [
                    (name, weight_bytes(source, precision, local_only=bool(offline)))
                    for name, precision, (source, _, offline) in zip(
                        (preset.target, preset.draft), (dtype, draft_dtype), found
                    )
                ]
                offline = bool(found[0][2])
                sizes += [(heads, heads_bytes(heads, dtype, offline)) for _, heads in preset.options]  # heads come too
                check_fits(sizes, where, freed=held_bytes(held))
                self.loading = f"checking the tokenizers of {preset.label}"
                tokenizers = [load_tokenizer(source, offline) for source, _, offline in found]
                check_tokenizers_fit(*tokenizers, preset.target, preset.draft)
                self._loaded = None
                del held
                gc.collect()
                for step, model in enumerate((f"target {preset.target}", f"draft {preset.draft}"), 1):
                    line = f"loading {model} ({step}/2; the first load of an offline model converts it once, 1-2 min)"
                    self.loading = line
                    report(line)
                    yield line
                    if step == 1:
                        target = open_target(preset.target, dtype, self.device, tokenizers[0])
                    else:
                        draft = open_draft(target, preset.draft, draft_dtype, self.device, tokenizers[1])
            finally:
                self.loading = ""
            self._loaded = LoadedPair(
                target, draft, choice=choice, preset=preset, dtype=dtype, draft_dtype=draft_dtype, asked=asked
            )
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
