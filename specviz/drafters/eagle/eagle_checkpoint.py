"""EAGLE checkpoints: the published layouts read strictly, and specviz's own heads written and read.

A folder holds config.json and the weights (model.safetensors or pytorch_model.bin). The layout is read from the
weight names: `layers.0.*` + `fc` is EAGLE-1/2 (fc over [embedding, feature], a bias, no input norm);
`midlayer.*` + `lm_head`, `d2t`, `t2d` is EAGLE-3 (a draft vocabulary, three target layers). An `embed_tokens`
copy is allowed and must fit the target (the target's own embedding is used). specviz's heads are EAGLE-1's
layout plus `head_vocab.json`, a shortlist of ids the head scores. Every key, every shape, the architecture and
the named base must fit, or the folder is refused in one line.
"""

import copy
from pathlib import Path

import torch

from ...errors import SpecvizError, first_line
from ...paths import ASSETS
from ..heads_common import (
    SHORTLIST_FILE,
    built,
    check_base,
    check_weights,
    locate_heads,
    meta_shapes,
    read_config,
    read_shortlist,
    shipped_folder,
    write_checkpoint,
    write_shortlist,
)
from .head import EagleHead

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
SHIPPED = ASSETS / "eagle"  # trained heads for the offline presets
SHAPE_FIELDS = (
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "hidden_act",
    "rms_norm_eps",
    "attention_bias",
    "mlp_bias",
)


class EagleCheckpointError(SpecvizError):
    """An EAGLE checkpoint is missing, damaged, or does not fit the target model."""


def shipped_eagle(base_name: str) -> Path | None:
    return shipped_folder(SHIPPED, base_name)


def read_state(folder: Path) -> dict[str, torch.Tensor]:
    for name in WEIGHT_FILES:
        path = folder / name
        if path.is_file():
            try:
                if name.endswith(".safetensors"):
                    from safetensors.torch import load_file

                    return load_file(str(path))
                return torch.load(path, map_location="cpu", weights_only=True)
            except Exception as exc:  # truncated, not a weights file, ...
                raise EagleCheckpointError(f"cannot read {path}: {first_line(exc)[:160]}") from None
    raise EagleCheckpointError(f"no EAGLE weights in {folder}: expected {' or '.join(WEIGHT_FILES)}")


def layout_of(state: dict) -> str:
    if any(k.startswith("midlayer.") for k in state):
        return "eagle3"
    if any(k.startswith("layers.0.") for k in state) and "fc.weight" in state:
        return "eagle1"
    raise EagleCheckpointError(
        "EAGLE weights have unexpected names (expected 'fc.*' with 'layers.0.*' for EAGLE-1/2 "
        "or 'midlayer.*' for EAGLE-3)"
    )


def eagle3_layers(num_layers: int) -> tuple[int, int, int]:
    """The target hidden states an EAGLE-3 head reads (indexes into hidden_states): low, middle and high."""
    return (2, num_layers // 2, num_layers - 3)


def head_config(saved: dict, target_config, layout: str = "eagle1"):
    """The layer's config: the target's, with the head's own sizes; what would not fit the target is refused. An
    EAGLE-3 head may be a Llama layer on any target (the published ones mostly are)."""
    model_type = saved.get("model_type")
    if model_type and model_type != target_config.model_type and not (layout == "eagle3" and model_type == "llama"):
        raise EagleCheckpointError(f"these EAGLE heads are for a {model_type} target, not {target_config.model_type}")
    if saved.get("hidden_size", target_config.hidden_size) != target_config.hidden_size:
        raise EagleCheckpointError(
            f"EAGLE heads of width {saved['hidden_size']} do not fit a target of hidden size "
            f"{target_config.hidden_size}"
        )
    if saved.get("target_hidden_size", target_config.hidden_size) != target_config.hidden_size:
        raise EagleCheckpointError(
            "EAGLE heads whose width differs from the target's (target_hidden_size) are not supported"
        )
    vocab = saved.get("vocab_size", target_config.vocab_size)
    if vocab != target_config.vocab_size:
        raise EagleCheckpointError(
            f"these EAGLE heads were made for a vocabulary of {vocab} ids; the target has {target_config.vocab_size}"
        )
    theta = saved.get("rope_theta")
    ours = (getattr(target_config, "rope_parameters", None) or {}).get(
        "rope_theta", getattr(target_config, "rope_theta", None)
    )
    if theta is not None and ours is not None and float(theta) != float(ours):
        raise EagleCheckpointError(f"these EAGLE heads use rope_theta {theta}; the target uses {ours}")
    config = copy.deepcopy(target_config)
    for name in SHAPE_FIELDS:
        if name in saved and saved[name] is not None:
            setattr(config, name, saved[name])
    config.num_hidden_layers = 1
    config.layer_types = ["full_attention"]
    config._attn_implementation = "sdpa"
    return config


def load_eagle(where, target) -> tuple[EagleHead, tuple[int, ...]]:
    """Heads from a folder or Hub id, strictly checked against the target (a LoadedModel). Returns the head and the
    target hidden states it reads."""
    folder = locate_heads(
        where,
        ["config.json", "*.safetensors", "pytorch_model.bin", SHORTLIST_FILE],
        "EAGLE heads",
        EagleCheckpointError,
    )
    saved = read_config(folder, "an EAGLE", EagleCheckpointError)
    check_base(saved, target.name, "EAGLE heads", EagleCheckpointError)
    state = read_state(folder)
    layout = layout_of(state)
    model = target.model
    config = built(lambda: head_config(saved, model.config, layout), "an EAGLE head", EagleCheckpointError)
    embed = state.pop("embed_tokens.weight", None)
    if embed is not None and tuple(embed.shape) != tuple(model.get_input_embeddings().weight.shape):
        raise EagleCheckpointError(
            f"EAGLE weight embed_tokens.weight has shape {tuple(embed.shape)}; the target's "
            f"embedding is {tuple(model.get_input_embeddings().weight.shape)}"
        )
    draft_vocab = state["lm_head.weight"].shape[0] if layout == "eagle3" and "lm_head.weight" in state else 0
    shortlist = read_shortlist(folder, config.vocab_size, EagleCheckpointError)
    if shortlist is not None and layout != "eagle1":
        raise EagleCheckpointError("a vocabulary shortlist (head_vocab.json) goes with EAGLE-1-layout heads only")
    family = "llama" if layout == "eagle3" and saved.get("model_type") == "llama" else ""

    def make() -> EagleHead:
        fc_bias = "fc.bias" in state
        return EagleHead(config, layout, model, fc_bias, draft_vocab=draft_vocab, shortlist=shortlist, family=family)

    check_weights(
        state,
        meta_shapes(make, "an EAGLE head", EagleCheckpointError),  # the config's shapes, none of them allocated
        EagleCheckpointError,
        f"EAGLE weights ({layout}) do not fit",
        "EAGLE weight",
        f"target '{target.name}'",
    )
    if layout == "eagle3" and not bool(((state["d2t"] + torch.arange(draft_vocab)) < config.vocab_size).all()):
        raise EagleCheckpointError("EAGLE-3 d2t maps draft ids outside the target's vocabulary")
    head = built(make, "an EAGLE head", EagleCheckpointError)  # only now, with the weights known to fit its shapes
    head.load_state_dict(state, strict=True)
    dtype = model.get_input_embeddings().weight.dtype
    layers = eagle3_layers(model.config.num_hidden_layers) if layout == "eagle3" else (-1,)
    return head.to(device=target.device, dtype=dtype).eval(), layers


def save_eagle(
    head: EagleHead, folder, base_name: str, dtype: torch.dtype | None = None, extra: dict | None = None
) -> Path:
    """config.json (the layer's sizes, the base's name) + model.safetensors (+ head_vocab.json for a shortlist)."""
    c = head.config
    config = {
        "base_model_name_or_path": base_name,
        "model_type": c.model_type,
        "hidden_size": c.hidden_size,
        "vocab_size": c.vocab_size,
        "num_hidden_layers": 1,
        "specviz_layout": head.layout,
        **{name: getattr(c, name) for name in SHAPE_FIELDS if getattr(c, name, None) is not None},
        **(extra or {}),
    }
    folder = write_checkpoint(folder, config, head.state_dict(), WEIGHT_FILES[0], dtype)
    write_shortlist(folder, head.shortlist)
    return folder
