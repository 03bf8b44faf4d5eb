"""The GPU fast path: a CachedLM whose KV cache is allocated once, so every forward over q tokens has the same
shapes and, on CUDA, is captured once as a CUDA graph and then replayed (one launch instead of hundreds of
small kernels, which is what bounds a 1-token forward of a small model on a GPU).

Rollback needs no copy at all: the cache keeps its stale tail, the write position is reset, and our own 4D
mask never lets a query see a column at or past its length. Where asked, the forward is torch.compile'd first
(compiled.py); under ZeroGPU (SPACES_ZERO_GPU) neither compile nor graphs are allowed, and the static cache runs
eagerly.
A capture that fails, or a first replay that differs from the eager forward on the same inputs, turns the graphs
off for the rest of the generation (with a warning) instead of failing it or giving other logits.
"""

import os
import warnings
import weakref

import torch

from ..errors import CustomMaskUnsupported, InvalidRequest, TreeAttentionUnsupported
from ..models.device import zero_gpu
from .cached_lm import TREE_MASK, CachedLM
from .compiled import compile_allowed, compiled_forward
from .kv_cache import KVCache, require_custom_mask, takes_custom_mask
from .tree import TokenTree, additive_mask, tree_mask, tree_positions

STALE_TAIL_MASK = "the mask that hides a static cache's stale tail"

LARGEST_GRAPH = 64  # query lengths up to this are captured; a longer forward (the prefill) runs eagerly
# a plain step, a draft's step, a verify of up to 20 drafts: a DFlash block of 16, the hybrid's tree of 12 with its copy
# branch of γ 8 beside it (on by default on a GPU)
STEP_WIDTHS = range(1, 22)


STATIC_ON_CPU_FROM = 512  # cache entries: from here on a CPU decodes faster with the cache allocated once


def wants_static(model: torch.nn.Module, capacity: int = 0) -> bool:
    """The static cache is the default on CUDA, and on a CPU for a long context: a dynamic cache concatenates every
    layer's keys and values into a new tensor at each step, a copy that grows with the context (on this project's
    CPU a 1950-token context decoded 24% faster with the static cache, a 46-token one 3% slower).
    `model.specviz_static = True/False` forces it either way. It hides the stale tail of the cache with its own 4D
    mask, so a model whose attention ignores such a mask never gets it."""
    default = model.device.type == "cuda" or capacity >= STATIC_ON_CPU_FROM
    return takes_custom_mask(model) and bool(getattr(model, "specviz_static", default))


def graphs_allowed(device: torch.device) -> bool:
    return device.type == "cuda" and not zero_gpu() and os.environ.get("SPECVIZ_CUDA_GRAPHS", "1") != "0"


def open_lm(model: torch.nn.Module, capacity: int, keep_hidden: bool | tuple[int, ...] = False) -> CachedLM:
    """The LM wrapper a generation should use: static (GPU, long contexts) or dynamic (short contexts on a CPU). A
    static one's capacity is rounded up, so that later generations of similar length reuse its cache and graphs."""
    if not wants_static(model, capacity):
        return CachedLM(model, keep_hidden)
    step = 1024 if model.device.type == "cuda" else 256  # a CPU pays attention over the whole width: round finely
    return StaticLM(model, -(-capacity // step) * step, keep_hidden)


class _Slot:
    """What a StaticLM keeps between generations: the cache, its captured graphs and their memory pool. A model
    keeps its free slots by (capacity, kept hidden layers); a generation takes one and gives it back when its
    StaticLM is gone, so graphs are captured once per loaded model and shape, and two generations of one model at
    once (the two sides of a race) never share a cache."""

    def __init__(self, model: torch.nn.Module, capacity: int):
        self.kv = KVCache.static(model, capacity)
        self.graphs: dict[tuple, tuple] = {}  # (q, last_only) -> (graph, input buffers, output tensors, eager)
        self.pool = None  # one memory pool for all of this slot's graphs, made at the first capture
        self.columns = torch.arange(capacity, device=model.device)


def free_slots(model: torch.nn.Module) -> dict[tuple, list[_Slot]]:
    return model.__dict__.setdefault("_specviz_slots", {})


class StaticLM(CachedLM):
    """CachedLM on a transformers StaticCache of `capacity` entries: its own extend and extend_tree (a full-width
    mask, graph replay); truncate and keep are CachedLM's, with nothing to free."""

    def __init__(self, model: torch.nn.Module, capacity: int, keep_hidden: bool | tuple[int, ...] = False):
        require_custom_mask(model, CustomMaskUnsupported, STALE_TAIL_MASK)  # else rolled-back entries stay visible
        super().__init__(model, keep_hidden)
        self.capacity = capacity
        free = free_slots(model).setdefault((capacity, self.hidden_layers), [])
        self._slot = free.pop() if free else _Slot(model, capacity)
        weakref.finalize(self, free.append, self._slot)  # back to the model's free slots once this one is gone
        self.kv = self._slot.kv
        self._graphs = self._slot.graphs
        self._columns = self._slot.columns
        self.graphs_on = graphs_allowed(self.device)
        self._hidden_mask = torch.finfo(model.dtype).min

    def _room_for(self, q: int) -> None:
        if self.length + q > self.capacity:
            raise InvalidRequest(f"the static KV cache holds {self.capacity} tokens; {self.length + q} needed")

    @torch.inference_mode()
    def extend(self, ids: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        q = ids.shape[-1]
        self._room_for(q)
        rows = self.length + torch.arange(q, device=self.device)
        mask = torch.where(self._columns[None, :] <= rows[:, None], 0.0, self._hidden_mask).to(self.model.dtype)
        logits, hidden = self._forward(ids.view(1, q).to(self.device), rows[None], mask[None, None], last_only)
        self._remember(hidden, self.length)
        self.length += q
        return logits

    @torch.inference_mode()
    def extend_tree(self, root: int, tree: TokenTree) -> torch.Tensor:
        if tree.is_chain:
            return self.extend(torch.tensor([root, *tree.tokens]))
        require_custom_mask(self.model, TreeAttentionUnsupported, TREE_MASK)
        q = 1 + len(tree.tokens)
        self._room_for(q)
        mask = torch.full((1, 1, q, self.capacity), self._hidden_mask, dtype=self.model.dtype, device=self.device)
        mask[..., : self.length + q] = tree_mask(tree, self.length, self.model.dtype, self.device)
        ids = torch.tensor([[root, *tree.tokens]], device=self.device)
        logits, hidden = self._forward(ids, tree_positions(tree, self.length, self.device), mask, False)
        self._remember(hidden, self.length)
        self.length += q
        return logits

    def _masked_forward(self, ids: torch.Tensor, positions: torch.Tensor, sees: torch.Tensor):
        require_custom_mask(self.model, TreeAttentionUnsupported, TREE_MASK)
        full = torch.zeros(sees.shape[0], self.capacity, dtype=torch.bool)
        full[:, : sees.shape[1]] = sees
        self._room_for(ids.shape[-1])
        return self._forward(ids, positions, additive_mask(full, self.model.dtype, self.device), False)

    def _drop_tail(self, length: int) -> None:
        pass  # rollback and compaction copy nothing: the tail stays, masked out, until the next forward overwrites it

    def _forward(self, ids, positions, mask, last_only: bool):
        """[q, V] logits (or [1, V]) and, with keep_hidden, [q, H * layers] kept hidden rows, eager or replayed."""
        self._reset_write_position()
        q = ids.shape[-1]
        key = (ids.shape[-1], last_only)
        if not self.graphs_on or q > LARGEST_GRAPH or not self.kv.is_allocated():
            return self._call(ids, positions, mask, last_only)
        if key not in self._graphs:
            try:
                self._graphs[key] = self._capture(ids, positions, mask, last_only)
            except Exception as exc:  # a model or driver that cannot be captured still runs, eagerly
                warnings.warn(
                    f"specviz: CUDA graph capture failed, running eagerly ({type(exc).__name__}: {exc})", stacklevel=2
                )
                self.graphs_on = False
                self._reset_write_position()
                return self._call(ids, positions, mask, last_only)
        graph, inputs, outputs, eager = self._graphs[key]
        for buffer, value in zip(inputs, (ids, positions, mask)):
            buffer.copy_(value)
        graph.replay()
        result = tuple(None if t is None else t.clone() for t in outputs)
        if eager is not None:  # the first replay must give what the eager forward gave on the same inputs
            self._graphs[key] = (graph, inputs, outputs, None)
            if not torch.allclose(result[0].float(), eager.float(), atol=1e-2, rtol=1e-2):
                warnings.warn(
                    "specviz: a CUDA graph replay differed from the eager forward; running eagerly", stacklevel=2
                )
                self.graphs_on = False
                return (eager, result[1])
        return result

    def _call(self, ids, positions, mask, last_only: bool):
        forward = compiled_forward(self.model) if compile_allowed(self.model) else self.model
        out = forward(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=self.cache,
            use_cache=True,
            logits_to_keep=1 if last_only else 0,
            output_hidden_states=self.keep_hidden,
        )
        return out.logits[0], self._rows_of(out)

    def _capture(self, ids, positions, mask, last_only: bool):
        """Warm up on a side stream (as CUDA graph capture requires), then record one forward on static buffers.
        The warm-up runs use the real inputs and write exactly the entries the replay will write again."""
        inputs = tuple(t.clone() for t in (ids, positions, mask))
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self._reset_write_position()
                eager = self._call(*inputs, last_only)[0]
        torch.cuda.current_stream(self.device).wait_stream(side)
        self._reset_write_position()
        self._slot.pool = self._slot.pool or torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._slot.pool):
            outputs = self._call(*inputs, last_only)
        self._reset_write_position()
        return graph, inputs, outputs, eager.clone()

    def _reset_write_position(self) -> None:
        """The next forward writes at our length, whatever the cache's own counter says (layers fill lazily)."""
        self.kv.set_write_position(self.length)


@torch.inference_mode()
def warm_graphs(model: torch.nn.Module, widths=STEP_WIDTHS) -> int:
    """Capture, in every free slot of `model`, the graphs of forwards over each width a step uses, so that no
    visitor's timed step pays for a capture; the number of slots.
    0 for a model set to the dynamic cache (its fast path failed)."""
    if not wants_static(model):
        return 0
    taken = [
        StaticLM(model, capacity, layers)
        for (capacity, layers), free in list(free_slots(model).items())
        for _ in range(len(free))
    ]
    for lm in taken:
        lm.extend(torch.zeros(8, dtype=torch.long))  # the cache is filled once, so later forwards may be captured
        for q in widths:
            for last_only in (True, False):
                lm.length = 8
                lm.extend(torch.zeros(q, dtype=torch.long), last_only)
        lm.length = 0
    return len(taken)
