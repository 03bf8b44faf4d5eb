"""llama.cpp as a runtime: each GGUF as its file ships it (its own quantisation), on a CPU, the engine laptops run.
It gives trees (a sequence per leaf), batches (a sequence per row) and sampling; it hands a caller no hidden states,
has no exact mode (its kernels for several tokens round otherwise than one token's), and no precisions to name.
Its costs are measured on each GGUF itself, once per file and CPU (forward_costs.py)."""

import torch

from ...errors import LlamaCppMissing
from ...models.loading import LoadedModel
from ..choice import RuntimePlan, plan_from
from ..runtime import Gives, Loading, Runtime
from .binding import installed, kernels, library, threads
from .forward_costs import forward_curve, kept_curve, version
from .gguf_model import GgufModel, gguf_problem, load_tokenizer, locate_gguf


class GgufLoaded(LoadedModel):
    """A model llama.cpp computes (its `model` a GgufModel): what the engine reads of a model, from llama.cpp."""

    @property
    def runtime(self) -> Runtime:
        return RUNTIME

    def open_lm(self, capacity: int, keep_hidden: bool | tuple[int, ...] = False):
        return self.model.open_lm(capacity, keep_hidden)

    def open_batch(self, capacity: int = 0):
        return self.model.open_batch(capacity)

    @property
    def context_length(self) -> int:
        return self.model.context_length

    @property
    def eos_ids(self) -> frozenset[int]:
        """The ids llama.cpp ends a generation at, and the tokenizer's end of text."""
        ids = self.companion("eos", self.model.end_of_text)
        own = self.tokenizer.eos_token_id
        return ids if own is None else ids | {own}

    @property
    def forward_curve(self) -> dict[int, float]:
        return self.model.forward_curve

    def next_logits(self, ids: list[int]) -> torch.Tensor:
        """[V] logits of the token after `ids` as plain decoding computes them: the text read as llama.cpp reads a
        prompt."""
        lm = self.model.open_lm(len(ids) + 1)
        lm.read_prompt(ids)
        return lm.extend(torch.tensor(ids[-1:]))[0]

    @property
    def vocab_size(self) -> int:
        return self.model.vocab

    @property
    def readable(self) -> int:
        return self.model.vocab


def load_gguf(name: str, tokenizer=None, report=lambda _: None) -> GgufLoaded:
    """`name` (an offline preset, a .gguf file or a folder holding one) in llama.cpp, with its tokenizer, its forward's
    cost measured (once per file and CPU)."""
    path = locate_gguf(name)
    model = GgufModel(path)  # llama.cpp reads the file first: a damaged one is said in its words
    tokenizer = tokenizer or load_tokenizer(name, path)
    model.forward_curve = forward_curve(model, report)
    precision = f"GGUF {model.describe()}"
    return GgufLoaded(name=name, model=model, tokenizer=tokenizer, device=torch.device("cpu"), precision=precision)


class LlamaCppRuntime(Runtime):
    name = "llama.cpp"
    summary = "each GGUF's own quantisation, on a CPU: the engine laptops run"
    gives = Gives(batches=True)
    engine = "llama.cpp"
    order = 20
    devices = ("cpu",)
    loads = "its forward is measured once"
    as_shipped = "each GGUF's own quantisation"
    raced_by = "scripts/llama_race.py races specviz on llama.cpp against llama.cpp's own binaries"
    no_exact = (
        "it computes a forward of several tokens with other kernels than one token's (a repacked product of 4 rows or "
        "more; one query over a cache of 512 entries or more is split otherwise), so a greedy race may part from "
        "plain decoding at a near tie, and the badge says where"
    )

    def problem(self, ask, where: torch.device) -> str:
        if not installed():
            return 'llama.cpp is not installed (pip install "specviz[llama]")'
        return next((p for p in (gguf_problem(ask.target), gguf_problem(ask.draft) if ask.draft else "") if p), "")

    def plan(self, ask, where: torch.device, report) -> RuntimePlan | None:
        """Each model's forward measured on its GGUF (kept from before, else now)."""

        def measured(name: str) -> tuple[dict, str]:
            path = locate_gguf(name)
            kept = kept_curve(path)
            if kept is None:
                model = GgufModel(path)
                kept = forward_curve(model, report), model.describe()
            return kept

        curve, words = measured(ask.target)
        draft_s = measured(ask.draft)[0][1] if ask.draft else 0.0
        return plan_from(self.name, f"GGUF {words}", curve, draft_s)

    def prepare(self, ask, where: torch.device, plan: RuntimePlan | None, report) -> Loading:
        """The files as their packages ship them: nothing to convert; what they take is their size."""
        names = [n for n in (ask.target, ask.draft) if n]
        sizes = [(name, locate_gguf(name).stat().st_size) for name in names]
        return Loading(
            sizes,
            lambda: load_gguf(ask.target, report=report),
            lambda target: load_gguf(ask.draft, report=report),
        )

    def device_line(self, where: torch.device) -> str:
        try:
            library()
        except LlamaCppMissing as exc:
            return f"llama.cpp: {exc}"
        return f"llama.cpp (llama-cpp-python {version()}, {threads()} threads, {kernels()})"

    def model_bytes(self, loaded: LoadedModel) -> int:
        return loaded.model.path.stat().st_size


RUNTIME = LlamaCppRuntime()
