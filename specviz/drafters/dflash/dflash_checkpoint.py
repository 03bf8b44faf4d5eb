"""DFlash checkpoints: the published layout read strictly, and specviz's own drafters written in it.

A folder holds config.json (a Qwen3 config of the draft layers; the DFlash fields in `dflash_config` or at the top:
`block_size`, `target_layer_ids`, `mask_token_id`, and `num_target_layers`) and model.safetensors with exactly
`layers.N.*`, `fc`, `hidden_norm` and `norm`. Every field is checked against the target (its hidden size, its
layer count, its embedding rows), every weight's name and shape against the layers the config describes; anything
else is refused in one line naming the field. DFlash-2 checkpoints (a candidate selector, convolutions) are refused.
"""

import re
from pathlib import Path

import torch
from transformers import Qwen3Config

from ...errors import SpecvizError, first_line
from ...paths import ASSETS
from ..heads_common import check_base, check_weights, locate_heads, meta_shapes, shipped_folder, write_checkpoint
from ..heads_common import read_config as heads_config
from .model import DFlashDraft

WEIGHTS = "model.safetensors"
SHIPPED = ASSETS / "dflash"  # drafters trained for the offline presets
LAYER_FIELDS = ("num_attention_heads", "num_key_value_heads", "intermediate_size", "rms_norm_eps")


class DFlashCheckpointError(SpecvizError):
    """A DFlash checkpoint is missing, damaged, or does not fit the target model."""


def shipped_dflash(base_name: str) -> Path | None:
    return shipped_folder(SHIPPED, base_name)


def spaced_layers(target_layers: int, count: int) -> list[int]:
    """The published default when a config names no layers: `count` target layers spread evenly from the second to
    the fourth from last (one: the middle one)."""
    if count == 1:
        return [target_layers // 2]
    return [round(1 + i * (target_layers - 4) / (count - 1)) for i in range(count)]


PLACEHOLDER = re.compile(r"\[PAD\d+\]")  # how a converted, padded vocabulary names the rows no text encodes to


def spare_row(tokenizer, rows: int) -> int | None:
    """A row of the target's embedding that no text encodes to, for the mask token: the first past the tokenizer's
    ids, else the first placeholder of a vocabulary padded to the embedding's rows; None when every row is a token."""
    if len(tokenizer) < rows:
        return len(tokenizer)
    names = tokenizer.convert_ids_to_tokens(list(range(rows)))
    return next((i for i, name in enumerate(names) if isinstance(name, str) and PLACEHOLDER.fullmatch(name)), None)


def _field(saved: dict, name: str, default=None):
    return (saved.get("dflash_config") or {}).get(name, saved.get(name, default))


def _integer(saved: dict, name: str, low: int, high: int | None = None, what: str = "") -> int:
    value = _field(saved, name)
    if value is None:
        raise DFlashCheckpointError(f"DFlash config has no {name}")
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value >= high):
        limit = f"{low}..{high - 1}" if high is not None else f"at least {low}"
        raise DFlashCheckpointError(f"DFlash {name} must be an integer {limit}{what}, got {value!r}")
    return value


def read_fields(saved: dict, target_config, embedding_rows: int) -> dict:
    """The DFlash fields of a config, each checked against the target; one line naming the first that fails."""
    if "DFlash2DraftModel" in (saved.get("architectures") or []) or _field(saved, "selector_rank") is not None:
        raise DFlashCheckpointError("DFlash-2 checkpoints (a candidate selector) are not supported; use a DFlash one")
    if saved.get("model_type", "qwen3") != "qwen3":
        raise DFlashCheckpointError(f"DFlash draft layers must be qwen3 layers, not {saved['model_type']!r}")
    layers = target_config.num_hidden_layers
    if saved.get("hidden_size") != target_config.hidden_size:
        raise DFlashCheckpointError(
            f"DFlash hidden_size {saved.get('hidden_size')} does not fit the target's hidden size "
            f"{target_config.hidden_size}"
        )
    named_layers = _field(saved, "num_target_layers")
    if named_layers is not None and named_layers != layers:
        raise DFlashCheckpointError(f"DFlash num_target_layers is {named_layers}; the target has {layers} layers")
    if _field(saved, "vocab_size", target_config.vocab_size) != target_config.vocab_size:
        raise DFlashCheckpointError(
            f"DFlash vocab_size {_field(saved, 'vocab_size')} is not the target's {target_config.vocab_size}"
        )
    draft_layers = _integer(saved, "num_hidden_layers", 1)
    block = _integer(saved, "block_size", 2, what=" (a block of 1 drafts nothing)")
    mask = _integer(saved, "mask_token_id", 0, embedding_rows, " (a row of the target's embedding)")
    ids = _field(saved, "target_layer_ids")
    if ids is None:
        ids = spaced_layers(layers, draft_layers)
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise DFlashCheckpointError(f"DFlash target_layer_ids must be a non-empty list of integers, got {ids!r}")
    if not all(0 <= i < layers for i in ids):
        raise DFlashCheckpointError(f"DFlash target_layer_ids {ids} name a layer past the target's {layers}")
    scales = (
        float(_field(saved, "input_embedding_scale", 1.0)),
        float(_field(saved, "output_multiplier", 1.0)),
        float(_field(saved, "final_logit_softcapping", 0.0) or 0.0),
    )
    return {"layers": draft_layers, "block_size": block, "mask_id": mask, "target_layers": tuple(ids), "scales": scales}


def config_for(
    target_config, *, layers: int, block_size: int, mask_id: int, target_layers, intermediate: int = 0
) -> dict:
    """config.json of a drafter of `layers` layers for a target of this config, its layers the target's shape (the
    MLP `intermediate` wide, else the target's), in the published layout: what build_draft reads."""
    c = target_config
    rope = dict(getattr(c, "rope_parameters", None) or {})
    return {
        "model_type": "qwen3",
        "hidden_size": c.hidden_size,
        "num_hidden_layers": layers,
        "num_target_layers": c.num_hidden_layers,
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads,
        "head_dim": getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
        "intermediate_size": intermediate or c.intermediate_size,
        "rms_norm_eps": c.rms_norm_eps,
        "vocab_size": c.vocab_size,
        "max_position_embeddings": c.max_position_embeddings,
        **({"rope_parameters": rope} if rope else {}),
        "block_size": block_size,
        "dflash_config": {"mask_token_id": mask_id, "target_layer_ids": list(target_layers)},
    }


def layer_config(saved: dict, target_config, draft_layers: int):
    """The draft layers' Qwen3 config: the checkpoint's sizes, its rotary settings, the target's width."""

    missing = [name for name in LAYER_FIELDS if saved.get(name) is None]
    if missing:
        raise DFlashCheckpointError(f"DFlash config has no {missing[0]}")
    known = {k: v for k, v in saved.items() if k not in ("architectures", "auto_map", "dflash_config", "model_type")}
    config = Qwen3Config(**{**known, "num_hidden_layers": draft_layers, "hidden_size": target_config.hidden_size})
    config.layer_types = ["full_attention"] * draft_layers
    return config


def read_config(folder: Path) -> dict:
    return heads_config(folder, "a DFlash", DFlashCheckpointError)


def read_weights(folder: Path) -> dict[str, torch.Tensor]:
    path = folder / WEIGHTS
    if not path.is_file():
        raise DFlashCheckpointError(f"no DFlash weights in {folder}: expected {WEIGHTS}")
    try:
        from safetensors.torch import load_file

        return load_file(str(path))
    except Exception as exc:  # truncated, not a weights file, ...
        raise DFlashCheckpointError(f"cannot read {path}: {first_line(exc)[:160]}") from None


def build_draft(saved: dict, target: torch.nn.Module) -> DFlashDraft:
    """An untrained draft of the config's shape for `target` (a transformers model), every field checked."""
    rows = target.get_input_embeddings().weight.shape[0]
    fields = read_fields(saved, target.config, rows)
    config = layer_config(saved, target.config, fields["layers"])
    return DFlashDraft(
        config,
        target,
        block_size=fields["block_size"],
        mask_id=fields["mask_id"],
        target_layers=fields["target_layers"],
        scales=fields["scales"],
    )


def load_dflash(where, target) -> DFlashDraft:
    """A drafter from a folder or Hub id, strictly checked against the target (a LoadedModel)."""
    folder = locate_heads(where, ["config.json", WEIGHTS], "a DFlash drafter", DFlashCheckpointError)
    saved = read_config(folder)
    check_base(saved, target.name, "DFlash drafters", DFlashCheckpointError)
    # the config's shapes, before any memory is spent on them: the weights must fit them before the draft is built
    shapes = meta_shapes(lambda: build_draft(saved, target.model), "a DFlash drafter", DFlashCheckpointError)
    state = read_weights(folder)
    check_weights(
        state,
        shapes,
        DFlashCheckpointError,
        "DFlash weights do not fit",
        "DFlash weight",
        f"target '{target.name}'",
    )
    draft = build_draft(saved, target.model)
    draft.load_state_dict(state, strict=True)
    dtype = target.model.get_input_embeddings().weight.dtype
    return draft.to(device=target.device, dtype=dtype).eval()


def dflash_config(draft: DFlashDraft, target_config, base_name: str) -> dict:
    """config.json in the published layout for a draft of specviz's own."""
    c = draft.config
    rope = dict(getattr(c, "rope_parameters", None) or {"rope_type": "default", "rope_theta": 10000.0})
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "base_model_name_or_path": base_name,
        "hidden_size": c.hidden_size,
        "num_hidden_layers": len(draft.layers),
        "num_target_layers": target_config.num_hidden_layers,
        "vocab_size": target_config.vocab_size,
        "head_dim": draft.layers[0].self_attn.head_dim,
        "hidden_act": c.hidden_act,
        "max_position_embeddings": c.max_position_embeddings,
        "rope_parameters": rope,
        "block_size": draft.block_size,
        "dflash_config": {"mask_token_id": draft.mask_id, "target_layer_ids": list(draft.target_layers)},
        **{name: getattr(c, name) for name in LAYER_FIELDS},
    }


def save_dflash(draft: DFlashDraft, folder, base_name: str, target_config, dtype=None) -> Path:
    return write_checkpoint(folder, dflash_config(draft, target_config, base_name), draft.state_dict(), WEIGHTS, dtype)
