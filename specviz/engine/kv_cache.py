"""The only code in specviz that knows how transformers keeps a KV cache: which fields hold the keys and values,
how a static cache counts its write position, which sign `crop` takes, and which attention implementations honour
a custom 4D mask. When transformers changes these, the first cache this module meets raises CacheLayoutChanged
naming the version and the field, instead of rollback and compaction quietly moving the wrong entries.
"""

import torch
import transformers
from transformers import DynamicCache, StaticCache

from ..errors import CacheLayoutChanged
from ..models.exact import EXACT_ATTENTION

# Attention implementations whose kernels add a custom 4D float mask to the scores (transformers hands a 4D mask to
# the kernel as it is), exact mode's row-by-row attention too. Flash kernels ignore it; flex attention and hub
# kernels are not trusted with one unchecked.
LOADABLE_WITH_MASKS = ("sdpa", "eager")
MASKABLE_ATTENTION = (*LOADABLE_WITH_MASKS, EXACT_ATTENTION)


def attention_of(model: torch.nn.Module) -> str:
    return getattr(model.config, "_attn_implementation", None) or ""


def takes_custom_mask(model: torch.nn.Module) -> bool:
    """Whether the model's attention honours a custom 4D float mask (sdpa, eager)."""
    return attention_of(model) in MASKABLE_ATTENTION


def require_custom_mask(model: torch.nn.Module, error: type[Exception], needed_for: str) -> None:
    """Raise `error` (one line) when the model's attention would ignore the custom mask `needed_for` relies on."""
    if not takes_custom_mask(model):
        raise error(
            f"attention implementation {attention_of(model)!r} cannot take {needed_for}; "
            f"load the model with {' or '.join(LOADABLE_WITH_MASKS)} attention"
        )


def _changed(field: str) -> CacheLayoutChanged:
    return CacheLayoutChanged(
        f"transformers {transformers.__version__} changed its KV cache: {field}; "
        "install the transformers version in requirements-app.txt"
    )


class KVCache:
    """One sequence's (batch 1) transformers cache, dynamic or static. `cache` is what a forward takes as
    past_key_values; everything else specviz does to it goes through this class."""

    def __init__(self, cache: DynamicCache | StaticCache):
        self.cache = cache
        self.static = isinstance(cache, StaticCache)
        self._checked = False  # the layout probe passed on allocated layers: it never runs again for this cache

    @classmethod
    def dynamic(cls, model: torch.nn.Module | None = None) -> "KVCache":
        """A cache that grows by concatenation (its layers shaped after the model's config, lazily without one)."""
        return cls(DynamicCache(config=None if model is None else model.config))

    @classmethod
    def static(cls, model: torch.nn.Module, capacity: int) -> "KVCache":
        """A cache of `capacity` entries, allocated at the first forward and written in place from then on."""
        return cls(StaticCache(config=model.config, max_cache_len=capacity))

    @classmethod
    def packed(cls, model: torch.nn.Module, alone: list["KVCache"], lengths: list[int]) -> "KVCache":
        """One dynamic cache of batch 1 holding several sequences one after another: caches of one row each, the
        first `lengths[b]` entries of cache b (a packed batch: no padding between them)."""
        packed = cls(DynamicCache(config=model.config))
        packed.append(alone, lengths)
        return packed

    def append(self, alone: list["KVCache"], lengths: list[int]) -> None:
        """Append, after the entries here, the first `lengths[b]` entries of each cache of one row `alone[b]`."""
        filled = [(cache._layers(), n) for cache, n in zip(alone, lengths) if n]
        for index in range(len(filled[0][0]) if filled else 0):
            keys = [layers[index].keys[:, :, :n] for layers, n in filled]
            values = [layers[index].values[:, :, :n] for layers, n in filled]
            if index < len(self.cache.layers) and self.cache.layers[index].is_initialized:
                layer = self.cache.layers[index]
                layer.keys = torch.cat([layer.keys, *keys], dim=2)
                layer.values = torch.cat([layer.values, *values], dim=2)
            else:
                self.cache.update(torch.cat(keys, dim=2), torch.cat(values, dim=2), index)

    def gather(self, columns: torch.Tensor) -> None:
        """Keep the entries at `columns` ([n]) in that order: one gather per layer of keys and values."""
        for layer in self._layers():
            if layer.is_initialized:
                layer.keys = layer.keys.index_select(2, columns)
                layer.values = layer.values.index_select(2, columns)

    def _layers(self) -> list:
        if not self._checked:
            self._check()
        return self.cache.layers

    def _check(self) -> None:
        """Probe (attribute lookups and shapes only: no copy, no device sync) every field this class uses. Layers
        allocate at their first forward; once all of them have, and pass, the probe is not run again."""
        layers = getattr(self.cache, "layers", None)
        if not isinstance(layers, list):
            raise _changed(f"{type(self.cache).__name__} has no list of layers (`layers`)")
        for method in ("crop", "get_seq_length"):
            if not callable(getattr(self.cache, method, None)):
                raise _changed(f"{type(self.cache).__name__}.{method} is gone")
        for index, layer in enumerate(layers):
            where = f"{type(layer).__name__} (layer {index})"
            if not isinstance(getattr(layer, "is_initialized", None), bool):
                raise _changed(f"{where} has no `is_initialized` flag")
            position = getattr(layer, "cumulative_length", None)
            if self.static and not (isinstance(position, torch.Tensor) and position.dim() == 0):
                raise _changed(f"{where} keeps no write position tensor (`cumulative_length`)")
            if layer.is_initialized:
                keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
                if not all(isinstance(t, torch.Tensor) and t.dim() == 4 for t in (keys, values)):
                    raise _changed(f"{where} holds no [batch, heads, entries, dim] `keys` and `values` tensors")
                if keys.shape[-2] != values.shape[-2]:
                    raise _changed(f"{where} holds {keys.shape[-2]} keys but {values.shape[-2]} values")
        self._checked = bool(layers) and all(layer.is_initialized for layer in layers)

    def entries(self) -> int:
        """How many entries a dynamic cache holds (a static one's count is its owner's length, not kept here)."""
        assert not self.static
        self._layers()
        return self.cache.get_seq_length()

    def crop(self, length: int) -> None:
        """Drop a dynamic cache's entries from `length` on (a static cache keeps its tail: its owner masks it)."""
        surplus = self.entries() - length
        if surplus > 0:
            self.cache.crop(-surplus)  # transformers 5: a negative count removes that many entries
            if self.cache.get_seq_length() != length:  # a shape read: catches a change of crop's meaning
                raise _changed(f"crop(-{surplus}) left {self.cache.get_seq_length()} entries, not {length}")

    def compact(self, start: int, source: torch.Tensor) -> None:
        """Move the entries at positions `source` (ascending, all >= start) to start, start + 1, ..., in place."""
        end = start + len(source)
        for layer in self._layers():
            layer.keys[..., start:end, :] = layer.keys.index_select(-2, source)
            layer.values[..., start:end, :] = layer.values.index_select(-2, source)

    def is_allocated(self) -> bool:
        """Whether a forward has run, so that every layer holds its tensors (a static cache allocates lazily)."""
        layers = self._layers()
        return bool(layers) and layers[0].is_initialized

    def set_write_position(self, length: int) -> None:
        """Make a static cache's next forward write at entry `length`, whatever its own counter says."""
        for layer in self._layers():
            if layer.is_initialized:  # a layer not yet allocated starts at 0 anyway
                layer.cumulative_length.fill_(length)
