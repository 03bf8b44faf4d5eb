"""Which device runs the models, said in one line at start-up, and refused in one line when a GPU is there (or was
asked for) but CUDA cannot start: a silent fall back to the CPU would make a GPU Space race at CPU speed."""

import glob
import math
import os
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from ..errors import SpecvizError, first_line


class DeviceError(SpecvizError):
    """A GPU was asked for, or is present, but this torch cannot use it."""


def zero_gpu() -> bool:
    """A ZeroGPU Space: a GPU is lent only inside `spaces.GPU` calls, so CUDA looks absent in the main process."""
    return os.environ.get("SPACES_ZERO_GPU", "").strip().lower() in ("1", "true")


def gpu_present() -> str:
    """Why this machine should have a usable GPU ('' when nothing says so): its NVIDIA device files, or ZeroGPU."""
    if zero_gpu():
        return "SPACES_ZERO_GPU is set"
    nodes = sorted(glob.glob("/dev/nvidia[0-9]*"))
    return f"{nodes[0]} exists" if nodes else ""


def cuda_problem() -> str:
    """Why CUDA cannot start with this torch, in words for the fix."""
    if torch.version.cuda is None:
        return (
            f"torch {torch.__version__} is a build without CUDA; install the CUDA 12.9 build "
            f"(pip install -r requirements.txt)"
        )
    try:
        torch.cuda.init()
    except Exception as exc:  # the driver's own words: too old for this CUDA, no device, ...
        reason = first_line(exc)
    else:
        reason = "torch.cuda.is_available() is false"
    return (
        f"torch {torch.__version__} (CUDA {torch.version.cuda}) cannot start CUDA: {reason[:200]}; a CUDA 12.x "
        f"build runs on NVIDIA drivers from R525 on, CUDA 13 needs R580"
    )


def resolve_device(device: str = "auto") -> torch.device:
    """cuda when asked for or available; the CPU only when no GPU is asked for or present. ZeroGPU counts as cuda:
    its models are placed there at start-up and run inside its GPU calls."""
    if device not in ("auto", "cpu", "cuda"):
        raise DeviceError(f"device must be auto, cpu or cuda, got {device!r}")
    if device == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available() or zero_gpu():
        return torch.device("cuda")
    present = gpu_present()
    if device == "cuda" or present:
        asked = "device 'cuda' was requested" if device == "cuda" else f"a GPU is present ({present})"
        raise DeviceError(f"{asked} but {cuda_problem()}; or run on the CPU with --device cpu")
    return torch.device("cpu")


def steady_attention(device: torch.device) -> None:
    """On CUDA, leave cuDNN's attention kernel out of scaled_dot_product_attention: it builds an execution plan for
    every new shape it meets (on an H200 an EAGLE head's first race spent 4.3 s of its 4.5 s there, a plan for each
    new key length of the head's growing cache; the next race, same lengths, 0.5 s). Eager forwards meet a new
    shape at every step (a head's cache, a drafter's context) and at every prompt (the prefill); the flash and
    memory-efficient kernels need no plan."""
    if device.type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(False)


def describe(device: torch.device, dtype: str) -> str:
    """The start-up line: the device, the torch and CUDA versions, the precision."""
    if device.type == "cuda" and not zero_gpu():
        free, total = torch.cuda.mem_get_info()
        where = f"cuda ({torch.cuda.get_device_name()}, {total / 2**30:.0f} GiB, {free / 2**30:.0f} GiB free)"
    elif device.type == "cuda":
        where = "cuda under ZeroGPU (a GPU is lent to each run)"
    else:
        where = f"cpu ({torch.get_num_threads()} threads)"
    cuda = f", CUDA {torch.version.cuda}" if torch.version.cuda else ""
    return f"device {where}; torch {torch.__version__}{cuda}; {dtype}"


class OutOfMemory(SpecvizError):
    """A pair whose weights would not fit in what the device has free."""


HEADROOM = 1.2  # weights × this: room for the KV caches, activations and the allocator's slack


def bytes_per_weight(dtype: str) -> int:
    """What one weight takes once loaded: int8 models are read in float32 first, then quantised."""
    return 2 if dtype == "bfloat16" else 4


def weight_bytes(source: str, dtype: str, local_only: bool = False) -> int:
    """The bytes of a model's weights in `dtype`, from its config alone (built on the meta device: nothing read)."""

    config = AutoConfig.from_pretrained(source, local_files_only=local_only)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters()) * bytes_per_weight(dtype)


def heads_bytes(location: str, dtype: str, local_only: bool = False) -> int:
    """The bytes a drafter's heads (Medusa, EAGLE, DFlash) take in `dtype`, the target's precision: the parameter
    counts in their safetensors headers, from a folder or from the Hub's metadata (no weights read); a .bin file's
    size as it is; 0 when neither can say (offline and not in a folder)."""

    per = bytes_per_weight(dtype)
    folder = Path(str(location)).expanduser()
    if folder.is_dir():
        from safetensors import safe_open

        total = 0
        for path in sorted(folder.glob("*.safetensors")):
            with safe_open(str(path), "pt") as f:
                for key in f.keys():
                    total += math.prod(f.get_slice(key).get_shape()) * per
        return total + sum(path.stat().st_size for path in folder.glob("*.bin"))
    if local_only:
        return 0
    try:
        from huggingface_hub import get_safetensors_metadata

        return sum(get_safetensors_metadata(str(location)).parameter_count.values()) * per
    except Exception:  # no such repo, no safetensors, no network: nothing to count
        return 0


def free_bytes(device: torch.device) -> int | None:
    """What the device has free for new weights (None when unknown). ZeroGPU holds weights in host memory until a
    GPU call, so there and on the CPU it is the host's available memory."""
    if device.type == "cuda" and not zero_gpu():
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        return int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None


def check_fits(models: list[tuple[str, int]], device: torch.device, freed: int = 0) -> None:
    """Refuse, before anything is freed or read, a pair whose weights (name, bytes) would not fit in what `device`
    has free plus `freed` (the pair it replaces)."""
    available = free_bytes(device)
    need = sum(size for _, size in models)
    if available is None or need * HEADROOM <= available + freed:
        return
    parts = " + ".join(f"{name} {size / 1e9:.1f} GB" for name, size in models)
    where = "GPU" if device.type == "cuda" and not zero_gpu() else "machine"
    raise OutOfMemory(
        f"the pair needs about {need * HEADROOM / 1e9:.1f} GB ({parts} of weights, and room to run) but "
        f"the {where} has {(available + freed) / 1e9:.1f} GB free; choose a smaller pair or precision"
    )


def batch_bytes(model: torch.nn.Module, rows: int, context: int, widest: int) -> int:
    """What decoding `rows` sequences of up to `context` tokens together needs beyond the weights: the KV cache
    (keys and values of every layer and row, kept twice while a step re-aligns it) and a verify forward's
    probabilities over the vocabulary (float32, the logits and their softmax) for `widest` tokens a row."""
    if hasattr(model, "entry_bytes"):  # a model of another runtime says what its cache keeps per token
        return rows * context * model.entry_bytes() + 3 * rows * widest * model.vocab * 4
    config = model.config
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    per_entry = 2 * config.num_hidden_layers * heads * head_dim * model.dtype.itemsize
    return 2 * rows * context * per_entry + 3 * rows * widest * config.vocab_size * 4


def check_batch_fits(model: torch.nn.Module, rows: int, context: int, widest: int, what: str) -> None:
    """Refuse, in one line and before anything is allocated, a batch the device has no room for."""
    available = free_bytes(model.device)
    need = batch_bytes(model, rows, context, widest)
    if available is None or need * HEADROOM <= available:
        return
    where = "GPU" if model.device.type == "cuda" and not zero_gpu() else "machine"
    raise OutOfMemory(
        f"{what}: {rows} rows of {context} tokens need about {need * HEADROOM / 1e9:.1f} GB beside the weights but the "
        f"{where} has {available / 1e9:.1f} GB free; choose fewer rows or fewer new tokens"
    )
