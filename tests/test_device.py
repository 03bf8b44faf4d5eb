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
    assert shelf.get("tiny", "bfloat16").dtype == "bfloat16"  # half the bytes it frees: fits
    with pytest.raises(OutOfMemory) as refused:  # twice the bytes it frees: refused
        shelf.get("tiny again", "float32")
    line = str(refused.value)
    assert "\n" not in line and line.startswith("the pair needs about ") and "choose a smaller pair" in line
    assert shelf.current().preset.label == "tiny" and shelf.current().dtype == "bfloat16"
