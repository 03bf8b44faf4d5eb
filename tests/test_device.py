"""Which device runs the models: a GPU that is there but cannot start is refused in one line (never a silent CPU
run), the start-up line names what runs, and a pair that would not fit is refused before the loaded one is freed."""

import pytest
import torch

from specviz.app.shelf import ModelShelf, PairPreset
from specviz.models import device as dev
from specviz.models.device import DeviceError, OutOfMemory


def test_no_gpu_anywhere_runs_on_the_cpu(monkeypatch):
    monkeypatch.setattr(dev, "gpu_present", lambda: "")
    assert dev.resolve_device("auto") == torch.device("cpu")
    assert dev.resolve_device("cpu") == torch.device("cpu")


def test_a_gpu_that_cuda_cannot_start_is_refused_not_skipped(monkeypatch):
    monkeypatch.setattr(dev, "gpu_present", lambda: "/dev/nvidia0 exists")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceError) as refused:
        dev.resolve_device("auto")
    line = str(refused.value)
    assert "\n" not in line and line.startswith("a GPU is present (/dev/nvidia0 exists) but torch ")
    assert "--device cpu" in line
    assert dev.resolve_device("cpu") == torch.device("cpu")  # asked for the CPU: no refusal


def test_cuda_asked_for_on_a_machine_without_it(monkeypatch):
    monkeypatch.setattr(dev, "gpu_present", lambda: "")
    with pytest.raises(DeviceError, match="^device 'cuda' was requested but torch .*build without CUDA"):
        dev.resolve_device("cuda")
    with pytest.raises(DeviceError, match="device must be auto, cpu or cuda"):
        dev.resolve_device("tpu")


def test_zero_gpu_places_models_on_cuda_without_a_gpu_in_the_main_process(monkeypatch):
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    assert dev.resolve_device("auto") == torch.device("cuda")
    assert dev.resolve_device("cpu") == torch.device("cpu")
    assert "ZeroGPU" in dev.describe(torch.device("cuda"), "bfloat16")


def test_the_start_up_line_names_device_torch_and_precision():
    line = dev.describe(torch.device("cpu"), "bfloat16")
    assert line.startswith("device cpu (") and f"torch {torch.__version__}" in line and line.endswith("; bfloat16")


def test_weights_are_counted_from_the_config_alone(pair_folders):
    from transformers import AutoModelForCausalLM

    real = AutoModelForCausalLM.from_pretrained(pair_folders[0])
    params = sum(p.numel() for p in real.parameters())
    assert dev.weight_bytes(str(pair_folders[0]), "float32") == 4 * params
    assert dev.weight_bytes(str(pair_folders[0]), "bfloat16") == 2 * params


def test_a_pair_that_would_not_fit_is_refused_and_the_loaded_one_stays(pair_folders, monkeypatch):
    target, draft = map(str, pair_folders)
    shelf = ModelShelf([PairPreset("tiny", target, draft), PairPreset("tiny again", draft, target)], "cpu")
    shelf.get("tiny", "float32")
    monkeypatch.setattr(dev, "free_bytes", lambda device: 0)  # nothing free but what the loaded pair would free
    assert shelf.get("tiny", "bfloat16").target.precision == "bfloat16"  # half the bytes it frees: fits
    with pytest.raises(OutOfMemory) as refused:  # twice the bytes it frees: refused
        shelf.get("tiny again", "float32")
    line = str(refused.value)
    assert "\n" not in line and line.startswith("the pair needs about ") and "choose a smaller pair" in line
    assert shelf.current().name == "tiny" and shelf.current().target.precision == "bfloat16"


def qwen3_meta(hidden, intermediate, layers, heads, kv_heads, tied):
    """A Qwen3 model of the published shape on the meta device: its parameters counted, nothing allocated."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        vocab_size=151936,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=128,
        tie_word_embeddings=tied,
    )
    with torch.device("meta"):
        return Qwen3ForCausalLM(config)


def test_the_qwen3_gpu_preset_with_its_dflash_and_eagle3_heads_fits_an_l4(monkeypatch):
    """The GPU default pair and the heads it brings, counted as the shelf counts them before loading (the shapes of
    the published Qwen3-4B, Qwen3-0.6B, a 5-layer block-16 DFlash drafter and a one-layer EAGLE-3 head with a
    32k draft vocabulary): they fit the 24 GB an L4 has, and a 10 GB card refuses them, naming every part."""
    from specviz.app.shelf import QWEN3_DFLASH
    from specviz.drafters.dflash.dflash_checkpoint import build_draft
    from specviz.drafters.eagle.eagle_checkpoint import head_config
    from specviz.drafters.eagle.head import EagleHead

    def size(module):
        return 2 * sum(p.numel() for p in module.parameters())  # bfloat16

    target = qwen3_meta(2560, 9728, 36, 32, 8, tied=True)
    draft = qwen3_meta(1024, 3072, 28, 16, 8, tied=True)
    dflash_config = {
        **{k: getattr(target.config, k) for k in ("hidden_size", "intermediate_size", "vocab_size", "head_dim")},
        **{k: getattr(target.config, k) for k in ("num_attention_heads", "num_key_value_heads", "rms_norm_eps")},
        "model_type": "qwen3",
        "num_hidden_layers": 5,
        "num_target_layers": 36,
        "block_size": 16,
        "dflash_config": {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33]},
    }
    with torch.device("meta"):
        dflash = build_draft(dflash_config, target)
        eagle = EagleHead(head_config({}, target.config), "eagle3", target, draft_vocab=32000)
    assert 0.5e9 < sum(p.numel() for p in dflash.parameters()) < 0.6e9  # "about 0.5B parameters"
    heads = dict(QWEN3_DFLASH.options)
    parts = [
        (QWEN3_DFLASH.target, size(target)),
        (QWEN3_DFLASH.draft, size(draft)),
        (heads["dflash"], size(dflash)),
        (heads["eagle"], size(eagle)),
    ]
    monkeypatch.setattr(dev, "free_bytes", lambda device: 24 * 1024**3)  # an L4
    dev.check_fits(parts, torch.device("cuda"))
    monkeypatch.setattr(dev, "free_bytes", lambda device: 10 * 1024**3)
    with pytest.raises(OutOfMemory) as refused:
        dev.check_fits(parts, torch.device("cuda"))
    assert all(name in str(refused.value) for name, _ in parts)


def test_the_heads_a_pair_brings_count_before_it_loads(pair_folders, pair_dflash, monkeypatch):
    target, draft = map(str, pair_folders)
    counted = dev.heads_bytes(str(pair_dflash), "float32")
    from safetensors.torch import load_file

    assert counted == 4 * sum(t.numel() for t in load_file(str(pair_dflash / "model.safetensors")).values())
    shelf = ModelShelf([PairPreset("tiny", target, draft, (("dflash", str(pair_dflash)),))], "cpu")
    pair_only = dev.weight_bytes(target, "float32") + dev.weight_bytes(draft, "float32")
    monkeypatch.setattr(dev, "free_bytes", lambda device: int(pair_only * dev.HEADROOM) + 1)  # the pair alone fits
    with pytest.raises(OutOfMemory, match=str(pair_dflash)):
        shelf.get("tiny", "float32")
    assert shelf.current() is None
