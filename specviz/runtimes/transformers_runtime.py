"""transformers as a runtime: a model in full precision (bfloat16, float32) or int8 by rows, on a CPU or a GPU, its
caches the engine's own (engine/cached_lm.py, static_lm.py, batched_lm.py). It gives everything the drafters read:
the target's hidden states, exact mode (models/exact.py), trees, batches, and its library's assisted generation.

Its costs are measured by precision from the models' configs alone (models/kernel_costs.py, kept in the cache
folder), which also picks the target's precision when none is named (models/precision_choice.py).
"""

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers

from ..engine.batched_lm import BatchedLM
from ..engine.fast_path import try_fast_path
from ..engine.static_lm import open_lm
from ..models.device import heads_bytes, resolve_device, weight_bytes
from ..models.exact import exact_for, exact_problem, is_exact
from ..models.loading import (
    LoadedModel,
    check_loadable,
    check_precision,
    draft_precision,
    load_tokenizer,
    quiet_transformers,
    read_model,
)
from ..models.offline import PRESETS, converted_path, preset_file
from ..models.precision_choice import PrecisionChoice, for_pair
from ..models.vocabulary import check_tokenizers_fit
from .choice import RuntimePlan, plan_from
from .runtime import AUTO, SAME, Gives, Loading, Runtime


@dataclass
class TransformersModel(LoadedModel):
    """A transformers model: its caches are the engine's, its sizes read off the module and its config."""

    def __post_init__(self):
        self.precision = self.precision or str(self.model.dtype).removeprefix("torch.")

    @property
    def runtime(self) -> Runtime:
        return RUNTIME

    def open_lm(self, capacity: int, keep_hidden: bool | tuple[int, ...] = False):
        return open_lm(self.model, capacity, keep_hidden)

    def open_batch(self, capacity: int = 0):
        return BatchedLM(self.model)

    @property
    def context_length(self) -> int:
        return int(getattr(self.model.config, "max_position_embeddings", None) or 2048)

    @torch.inference_mode()
    def next_logits(self, ids: list[int]) -> torch.Tensor:
        context = torch.tensor([ids], device=self.device)
        return self.model(input_ids=context).logits[0, -1]

    @property
    def eos_ids(self) -> frozenset[int]:
        ids = self.model.generation_config.eos_token_id
        ids = set(ids if isinstance(ids, (list, tuple)) else [] if ids is None else [ids])
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        return frozenset(ids)

    @property
    def vocab_size(self) -> int:
        return self.model.get_output_embeddings().out_features  # never the weight: an int8 one unpacks for seconds

    @property
    def readable(self) -> int:
        return self.model.get_input_embeddings().num_embeddings

    @property
    def load_note(self) -> str:
        return getattr(self.model, "specviz_load_note", "")

    def run_eagerly(self) -> None:
        self.model.specviz_static = False

    def try_fast_path(self) -> str:
        return try_fast_path(self.model, self.name)


def load_model(name: str, dtype: str = "bfloat16", device: str = "auto", tokenizer=None) -> TransformersModel:
    """`name` (an offline preset, a folder or a Hub id) in transformers at `dtype`; `tokenizer`: its own, when the
    caller has read it already."""
    model, tokenizer, where = read_model(name, dtype, device, tokenizer)
    return TransformersModel(name=name, model=model, tokenizer=tokenizer, device=where, precision=dtype)


def open_target(name: str, dtype: str = "bfloat16", device: str = "auto", tokenizer=None) -> TransformersModel:
    """A target as a run uses it: loaded, and exact mode's probe of this machine's kernels made once, at load, rather
    than inside the first run."""
    quiet_transformers()
    target = load_model(name, dtype, device, tokenizer)
    exact_problem(target.model)
    return target


def choose_precision(target: str, draft: str = "", device: str = "auto", report=lambda _: None) -> PrecisionChoice:
    """The target's precision measured best for this pair on this device (models/precision_choice.py): only the
    configs are read; the measurement is kept in the cache folder. `report` hears the measuring and the reason."""
    source, offline = _config_source(target)
    draft_source = _config_source(draft)[0] if draft else ""
    choice = for_pair(source, draft_source, resolve_device(device), bool(offline), report)
    report(f"precision: {choice.reason}")
    return choice


def _config_source(name: str) -> tuple[str, bool]:
    """Where a model's config is read for the precision's measurement, and whether the Hub is out of reach: an
    offline preset not converted yet is read from its GGUF (converting it takes minutes, reading it a moment)."""
    if name in PRESETS and not (converted_path(PRESETS[name]) / "config.json").is_file():
        return str(preset_file(name)), False
    source, _, offline = check_loadable(name)
    return source, bool(offline)


def _gguf_only(name: str) -> bool:
    """A model given as a .gguf file (or a folder holding one and no transformers model), which transformers does
    not load here."""
    path = Path(name).expanduser()
    if not name or name in PRESETS or not path.exists():
        return False
    if path.is_dir():
        return not (path / "config.json").is_file() and any(path.glob("*.gguf"))
    return path.suffix == ".gguf"


class TransformersRuntime(Runtime):
    name = "transformers"
    summary = "full precision or int8, on a CPU or a GPU"
    gives = Gives(
        hidden_states=True,
        exact_mode=True,
        batches=True,
        assisted_generation=True,
        precisions=("bfloat16", "float32", "int8"),
    )
    engine = "transformers"
    order = 10
    devices = ("cpu", "cuda")
    loads = "the first load of an offline model converts it once, 1-2 min"

    def problem(self, ask, where: torch.device) -> str:
        found = next((n for n in (ask.target, ask.draft) if _gguf_only(n)), "")
        return f"'{found}' is a GGUF file, which transformers does not load here" if found else ""

    def plan(self, ask, where: torch.device, report) -> RuntimePlan | None:
        """The precision measured for the pair (its cost table), priced at the precision asked, else the one chosen."""
        precision = choose_precision(ask.target, ask.draft, ask.device, report)
        table = precision.table
        path = ask.dtype if table is not None and ask.dtype in table.forward else precision.dtype
        if table is None or path not in table.forward:
            return None
        curve = {w: table.at(path, w) for w in sorted(table.forward[path])}
        return plan_from(self.name, path, curve, precision.draft_s, measured=precision)

    def prepare(self, ask, where: torch.device, plan: RuntimePlan | None, report) -> Loading:
        precision = plan.measured if plan is not None else None
        dtype = ask.dtype
        if dtype == AUTO:  # measured (or read back) before any weights are read
            precision = precision or choose_precision(ask.target, ask.draft, ask.device, report)
            dtype = precision.dtype
        elif precision is not None and precision.dtype != dtype:
            precision = None  # a precision named: nothing was chosen
        draft_dtype = dtype if ask.draft_dtype == SAME else draft_precision(ask.draft_dtype, dtype, where)
        for each in (dtype, draft_dtype):
            check_precision(each, ask.device)
        names = [n for n in (ask.target, ask.draft) if n]
        found = [check_loadable(n) for n in names]
        sizes = [
            (name, weight_bytes(source, each, local_only=bool(offline)))
            for name, each, (source, _, offline) in zip(names, (dtype, draft_dtype), found)
        ]
        sizes += [(heads, heads_bytes(heads, dtype, bool(found[0][2]))) for _, heads in ask.brings]
        tokenizers = [load_tokenizer(source, offline) for source, _, offline in found]
        if ask.draft:
            check_tokenizers_fit(*tokenizers, ask.target, ask.draft)
        return Loading(
            sizes,
            lambda: open_target(ask.target, dtype, ask.device, tokenizers[0]),
            lambda target: load_model(ask.draft, draft_dtype, ask.device, tokenizers[1]),
            precision,
        )

    def device_line(self, where: torch.device) -> str:
        return f"transformers {transformers.__version__} on torch {torch.__version__}"

    def model_bytes(self, loaded: LoadedModel) -> int:
        return sum(p.numel() * p.element_size() for p in loaded.model.parameters())

    def exact_line(self, target: LoadedModel, wanted: bool) -> str:
        return exact_for(target.model, wanted)

    def exact_holds(self, target: LoadedModel) -> bool:
        return not exact_problem(target.model)

    @contextmanager
    def without_exact(self, target: LoadedModel):
        was = is_exact(target.model)
        exact_for(target.model, False)
        try:
            yield
        finally:
            exact_for(target.model, was)


RUNTIME = TransformersRuntime()
