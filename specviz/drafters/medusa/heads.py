"""Medusa-1 heads and their checkpoints (official layout and a compact one).

A head is ResBlock x L (x + SiLU(Wx + b)) then a linear map to the vocabulary; head k, applied to the hidden
state at position t, guesses the token at t + 2 + k (the target's own LM head gives t + 1). The compact layout
stores only the ResBlocks and reuses the base model's LM head, so heads for a small model are a few MB. A compact
checkpoint may also name a vocabulary shortlist (`head_vocab.json`): the heads then score only those ids, which
cuts their cost from K full-vocabulary products to K small ones (they only propose; the target still verifies).
"""

from pathlib import Path

import torch
from torch import nn

from ...errors import SpecvizError
from ...paths import ASSETS
from ..heads_common import (
    SHORTLIST_FILE,
    check_base,
    check_weights,
    read_config,
    read_shortlist,
    register_shortlist,
    shipped_folder,
    write_checkpoint,
    write_shortlist,
)
from ..heads_common import (
    locate_heads as shared_locate,
)


class MedusaCheckpointError(SpecvizError):
    """A Medusa checkpoint is missing, malformed, or does not fit the base model."""


class ResBlock(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.linear = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + nn.functional.silu(self.linear(x))


class MedusaHeads(nn.Module):
    """K heads. `lm_head` given: compact (heads end in the shared LM head); else each head owns its linear map."""

    def __init__(
        self,
        hidden: int,
        vocab: int,
        num_heads: int,
        num_layers: int,
        lm_head: nn.Module | None = None,
        shortlist: torch.Tensor | None = None,
    ):
        super().__init__()
        if shortlist is not None and lm_head is None:
            raise MedusaCheckpointError("a vocabulary shortlist needs compact heads (heads sharing the base LM head)")
        self.compact = lm_head is not None
        self.heads = nn.ModuleList(
            nn.Sequential(
                *[ResBlock(hidden) for _ in range(num_layers)],
                *([] if self.compact else [nn.Linear(hidden, vocab, bias=False)]),
            )
            for _ in range(num_heads)
        )
        self._lm_head = [lm_head]  # a list keeps the shared head out of this module's state dict
        self.num_layers = num_layers
        register_shortlist(self, lm_head, shortlist)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., H] hidden states -> [K, ..., V'] logits, head k guessing k + 2 places ahead; V' is the
        shortlist's length when there is one (position i means token shortlist[i]), else the vocabulary."""
        outs = torch.stack([head(hidden) for head in self.heads])
        if not self.compact:
            return outs
        if self.shortlist is not None:
            return outs @ self.rows.T
        return self._lm_head[0](outs)  # one product for all K heads: the LM head's weights are read once

    @torch.inference_mode()
    def top_ids(self, hidden: torch.Tensor, widths: list[int]) -> list[list[int]]:
        """The `widths[k]` likeliest token ids of head k for one hidden state [H] (one device-to-host copy)."""
        logits = self(hidden)[: len(widths)]
        index = torch.topk(logits, min(max(widths), logits.shape[-1])).indices  # [K, W], likeliest first
        ids = (index if self.shortlist is None else self.shortlist[index]).tolist()
        return [row[:width] for row, width in zip(ids, widths)]


WEIGHT_FILES = ("medusa_lm_head.safetensors", "medusa_lm_head.pt")


def read_state(folder: Path) -> dict[str, torch.Tensor]:
    for name in WEIGHT_FILES:
        path = folder / name
        if path.is_file():
            if name.endswith(".safetensors"):
                from safetensors.torch import load_file

                return load_file(str(path))
            return torch.load(path, map_location="cpu", weights_only=True)
    raise MedusaCheckpointError(f"no Medusa weights in {folder}: expected one of {', '.join(WEIGHT_FILES)}")


def _shape_of(state: dict) -> tuple[int, int, bool]:
    """(heads, layers, compact) counted from the keys; the published configs understate the head count."""
    try:
        heads = 1 + max(int(k.split(".")[0]) for k in state)
        layers = 1 + max(int(k.split(".")[1]) for k in state if k.split(".")[2:3] == ["linear"])
    except (ValueError, IndexError):
        raise MedusaCheckpointError(
            "Medusa weights have unexpected key names (expected '<head>.<layer>.linear.weight')"
        ) from None
    compact = not any(k == f"0.{layers}.weight" for k in state)
    return heads, layers, compact


SHIPPED = ASSETS / "medusa"  # trained heads for the offline presets


def shipped_heads(base_name: str) -> Path | None:
    """The heads folder specviz ships for an offline preset, if any."""
    return shipped_folder(SHIPPED, base_name)


def locate_heads(spec: str | Path) -> Path:
    return shared_locate(
        spec, ["config.json", "medusa_lm_head.*", SHORTLIST_FILE], "Medusa heads", MedusaCheckpointError
    )


def load_medusa(folder: str | Path, base) -> MedusaHeads:
    """Heads from a checkpoint folder or Hub id (config.json + weights), strictly checked against `base`."""
    folder = locate_heads(folder)
    config = read_config(folder, "a Medusa", MedusaCheckpointError)
    check_base(config, base.name, "heads", MedusaCheckpointError)
    state = read_state(folder)
    heads, layers, compact = _shape_of(state)
    hidden = base.model.config.hidden_size
    vocab = base.vocab_size
    shortlist = read_shortlist(folder, vocab, MedusaCheckpointError)
    module = MedusaHeads(
        hidden, vocab, heads, layers, base.model.get_output_embeddings() if compact else None, shortlist
    )
    expected = module.heads.state_dict()  # keys as published: '<head>.<layer>...'
    check_weights(
        state,
        expected,
        MedusaCheckpointError,
        f"Medusa weights do not match {heads} heads x {layers} layers",
        "Medusa weight",
        f"base '{base.name}'",
        f" (hidden {hidden}, vocabulary {vocab})",
    )
    module.heads.load_state_dict(state, strict=True)
    return module.to(device=base.device, dtype=base.model.dtype).eval()


def save_medusa(heads: MedusaHeads, folder: str | Path, base_name: str, dtype: torch.dtype | None = None) -> Path:
    """Write config.json and medusa_lm_head.safetensors in the official layout (compact heads omit the linear),
    plus head_vocab.json for a shortlist; `dtype` (e.g. bfloat16) halves the file of fp32-trained heads."""
    config = {
        "base_model_name_or_path": base_name,
        "medusa_num_heads": len(heads.heads),
        "medusa_num_layers": heads.num_layers,
        "specviz_compact": heads.compact,
    }
    folder = write_checkpoint(folder, config, heads.heads.state_dict(), WEIGHT_FILES[0], dtype)
    write_shortlist(folder, heads.shortlist)
    return folder
