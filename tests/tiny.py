"""Tiny real transformers models with random (seeded) weights, a word-level tokenizer for them, and the tiny pair
(with Medusa and EAGLE heads) saved as folders: what the tests load, and what scripts/gpu_app_check.py serves."""

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from specviz.runtimes.transformers_runtime import TransformersModel

EOS = "<eos>"


def word_tokenizer(words: list[str]) -> PreTrainedTokenizerFast:
    vocab = {w: i for i, w in enumerate([EOS, "<unk>", *words])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token=EOS, unk_token="<unk>")


def tiny_llama(
    vocab_size: int,
    seed: int,
    layers: int = 2,
    sharpness: float = 4.0,
    context: int = 512,
    rope_theta: float = 10000.0,
    intermediate: int = 128,
) -> LlamaForCausalLM:
    return _tiny(
        LlamaConfig,
        LlamaForCausalLM,
        seed,
        sharpness,
        vocab_size=vocab_size,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        max_position_embeddings=context,
        rope_theta=rope_theta,
    )


def tiny_qwen3(vocab_size: int, seed: int, layers: int = 4, sharpness: float = 4.0, context: int = 512):
    """A tiny Qwen3 target (the family DFlash's published drafters are made for)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    return _tiny(
        Qwen3Config,
        Qwen3ForCausalLM,
        seed,
        sharpness,
        vocab_size=vocab_size,
        intermediate_size=128,
        num_hidden_layers=layers,
        head_dim=16,
        max_position_embeddings=context,
    )


def _tiny(config_class, model_class, seed: int, sharpness: float, **sizes):
    """A 64-wide model of 4 query heads and 2 key/value heads, EOS id 0, seeded random weights."""
    torch.manual_seed(seed)
    shared = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, eos_token_id=0, bos_token_id=None)
    config = config_class(**shared, pad_token_id=None, tie_word_embeddings=False, **sizes)
    model = model_class(config).float().eval()
    with torch.no_grad():  # random init gives near-uniform outputs; scale the head so choices are clear
        model.lm_head.weight.mul_(sharpness / model.lm_head.weight.std())
        model.lm_head.weight[0] = 0  # EOS logit 0: rarely chosen, so runs are long; tests pick EOS explicitly
    return model


def loaded(model, tokenizer, name="tiny") -> TransformersModel:
    return TransformersModel(name=name, model=model, tokenizer=tokenizer, device=torch.device("cpu"))


def perturbed(model: LlamaForCausalLM, seed: int, scale: float) -> LlamaForCausalLM:
    """A copy of `model` with noise on every weight: a draft that agrees with it only partly."""
    config = model.config
    copy = tiny_llama(
        config.vocab_size, seed=seed, layers=config.num_hidden_layers, intermediate=config.intermediate_size
    )
    copy.load_state_dict(model.state_dict())
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for w in copy.parameters():
            w.add_(torch.randn(w.shape, generator=gen) * scale * w.std().clamp_min(1e-3))
    return copy


PAIR_WORDS = [f"w{i}" for i in range(60)]


def save_pair(root: Path, words: list[str] = PAIR_WORDS) -> tuple[Path, Path]:
    """A tiny target (context 4096, room for long runs to stop) and a partly agreeing draft, saved as folders."""
    tokenizer = word_tokenizer(words)
    big = tiny_llama(len(tokenizer), seed=1, context=4096)
    for name, model in (("target", big), ("draft", perturbed(big, seed=3, scale=0.3))):
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    return root / "target", root / "draft"


def save_zero_medusa(target_folder: Path, out: Path) -> Path:
    """Compact Medusa heads for a saved target that repeat its own next-token guess (zero ResBlocks)."""
    from transformers import AutoModelForCausalLM

    from specviz.drafters.medusa.heads import MedusaHeads, save_medusa

    target = AutoModelForCausalLM.from_pretrained(target_folder)
    lm_head = target.get_output_embeddings()
    heads = MedusaHeads(target.config.hidden_size, lm_head.weight.shape[0], 4, 1, lm_head)
    with torch.no_grad():
        for p in heads.parameters():
            p.zero_()
    return save_medusa(heads, out, str(target_folder))


def save_random_eagle(target_folder: Path, out: Path) -> Path:
    """An EAGLE head (random weights, specviz's layout) for a saved target: it drafts, and is rarely accepted."""
    from transformers import AutoModelForCausalLM

    from specviz.drafters.eagle.eagle_checkpoint import head_config, save_eagle
    from specviz.drafters.eagle.head import EagleHead

    target = AutoModelForCausalLM.from_pretrained(target_folder)
    torch.manual_seed(0)
    head = EagleHead(head_config({}, target.config), "eagle1", target)
    return save_eagle(head, out, str(target_folder))


def save_served_pair(root: Path) -> tuple[str, list[str]]:
    """The tiny pair with its Medusa and EAGLE heads and a DFlash drafter saved under `root`: (its menu label, app.py's
    flags for it)."""
    target, draft = save_pair(root)
    medusa = save_zero_medusa(target, root / "heads")
    eagle = save_random_eagle(target, root / "eagle")
    dflash = save_random_dflash(target, root / "dflash")
    flags = ["--target", str(target), "--draft", str(draft), "--medusa", str(medusa), "--eagle", str(eagle)]
    flags += ["--dflash", str(dflash)]
    return f"{target} ← {draft}", flags


def dflash_config(target, block_size: int, mask_id: int, layers: int = 1, target_layers=(0, 2)) -> dict:
    """config.json of a tiny DFlash drafter for `target`, in the published layout."""
    c = target.config
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "hidden_size": c.hidden_size,
        "num_hidden_layers": layers,
        "num_target_layers": c.num_hidden_layers,
        "vocab_size": c.vocab_size,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "intermediate_size": 128,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "max_position_embeddings": c.max_position_embeddings,
        "block_size": block_size,
        "dflash_config": {"mask_token_id": mask_id, "target_layer_ids": list(target_layers)},
    }


def save_random_dflash(target_folder: Path, out: Path, block_size: int = 4) -> Path:
    """A DFlash drafter (random weights, the published layout) for a saved target: it drafts, rarely accepted. Its
    mask token is the target's last id."""
    from transformers import AutoModelForCausalLM

    from specviz.drafters.dflash.dflash_checkpoint import build_draft, save_dflash

    target = AutoModelForCausalLM.from_pretrained(target_folder)
    torch.manual_seed(0)
    layers = (0, target.config.num_hidden_layers - 1)
    draft = build_draft(dflash_config(target, block_size, target.config.vocab_size - 1, target_layers=layers), target)
    return save_dflash(draft, out, str(target_folder), target.config)


def same_up_to_rows(a: torch.Tensor, b: torch.Tensor, share: float = 1e-5) -> bool:
    """Outputs of the same tokens fed in forwards of different row counts: a CPU's float32 kernels may round them
    apart by a few units in the last place of the largest value, by how much depends on the CPU; a wrong cache entry
    or a wrong rollback moves them by orders of magnitude more."""
    return bool((a - b).abs().max() <= share * b.abs().max())
