"""A loaded model as every runtime hands it over (`LoadedModel`); transformers' weights read by preset, local folder or
Hub id through one path; prompts encoded for a model."""

import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging

from ..errors import InvalidRequest, ModelLoadError, ModelNotFound, RuntimeUnsupported, first_line
from .device import resolve_device, steady_attention, zero_gpu
from .integrity import folder_problem
from .offline import PRESETS, ensure_converted
from .quantize import int8_rows
from .smoothing import CALIBRATION

DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "int8": torch.float32}  # int8: float32, then quantised
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass
class LoadedModel:
    """A model as its runtime loaded it: what the engine, the drafters and the screens read of any model. Each
    runtime's own subclass (runtimes/) answers how its caches open, one row (`open_lm`: CachedLM's verbs) or several
    (`open_batch`: BatchedLM's), and what its vocabulary and context are; the engine never asks which runtime it is."""

    name: str
    model: object  # what the runtime computes with (a torch module, a llama.cpp model)
    tokenizer: object
    device: torch.device
    precision: str = ""  # how its weights are held, in words: "bfloat16", "int8", "GGUF qwen2 1.5B Q4_K - Medium"
    # what was loaded for this model (e.g. Medusa heads), keyed by kind and location, kept as long as the model is
    companions: dict = field(default_factory=dict, repr=False, compare=False)
    runtime = None  # the runtime that loaded it (runtimes/runtime.Runtime): each subclass names its own

    def open_lm(self, capacity: int, keep_hidden: bool | tuple[int, ...] = False):
        """One row's cache with room for `capacity` tokens (CachedLM's verbs); `keep_hidden`: the hidden states a
        head reads, kept beside it."""
        raise NotImplementedError

    def open_batch(self, capacity: int = 0):
        """A cache of several rows (BatchedLM's verbs), room for `capacity` entries of them all (0: its default)."""
        raise RuntimeUnsupported(f"{self.runtime.name} decodes one request at a time: it gives no batches")

    @property
    def context_length(self) -> int:
        raise NotImplementedError

    @property
    def eos_ids(self) -> frozenset[int]:
        raise NotImplementedError

    @property
    def vocab_size(self) -> int:
        """The width of its logits."""
        raise NotImplementedError

    @property
    def readable(self) -> int:
        """How many ids the model can be fed (its tokenizer may know more)."""
        raise NotImplementedError

    def next_logits(self, ids: list[int]) -> torch.Tensor:
        """[V] logits of the token after `ids`, as plain decoding computes them."""
        raise NotImplementedError

    @property
    def forward_curve(self) -> dict[int, float] | None:
        """Seconds of one forward over k tokens by k, where its runtime measured them at load (None: not there)."""
        return None

    @property
    def load_note(self) -> str:
        """What went otherwise than planned while it loaded, in one line ("": nothing)."""
        return ""

    def run_eagerly(self) -> None:
        """Its runtime's plainest path from now on (a fast path that failed for its pair)."""

    def try_fast_path(self) -> str:
        """Its runtime's fast path tried piece by piece before any visitor's run: '' when it held (or it has none),
        else the line naming the piece that failed, the model already on the fallback."""
        return ""

    def companion(self, key, load):
        """The companion under `key`, loaded once by `load()` and kept with this model."""
        if key not in self.companions:
            self.companions[key] = load()
        return self.companions[key]

    def check_readable(self, ids: list[int]) -> None:
        """One line for a prompt holding a token the tokenizer knows but the model has no embedding row for."""
        bad = next((i for i in ids if i >= self.readable), None)
        if bad is not None:
            raise InvalidRequest(
                f"the prompt holds token {bad} ({self.tokenizer.convert_ids_to_tokens(bad)!r}), which "
                f"the tokenizer knows but '{self.name}' cannot read (it has {self.readable} embedding "
                f"rows); remove that text from the prompt"
            )


def quiet_transformers() -> None:
    """No progress bars or advice from transformers: the CLI prints one line per error, the app its own status."""

    logging.set_verbosity_error()
    logging.disable_progress_bar()


def linear_weight(linear: torch.nn.Module) -> torch.Tensor:
    """A Linear layer's [out, in] weight as a float tensor, also when the layer is an int8 dynamic one."""
    weight = linear.weight() if callable(linear.weight) else linear.weight
    return weight.dequantize() if weight.is_quantized else weight


def draft_precision(asked: str, target: str, device: torch.device) -> str:
    """The draft's precision: the one asked for; else the one measured fastest on the device (int8 on a CPU); else
    the target's. Every command and the app take this default (the benchmark's list of several among them)."""
    return asked or best_draft_dtype(device) or target


def best_draft_dtype(device: torch.device) -> str:
    """The draft precision measured fastest on `device` when none is asked for: int8 by rows on a CPU (fbgemm's integer
    product streams a quarter of float32's bytes; docs/benchmark-log.md), else "" (the target's)."""
    return "int8" if device.type == "cpu" else ""


def looks_like_hub_id(name: str) -> bool:
    """owner/name, as the Hugging Face Hub spells repository ids."""
    return bool(_HUB_ID.match(str(name)))


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def hub_unreachable_reason(timeout: float = 3.0) -> str | None:
    """None if the Hub endpoint accepts a connection, else why not (checked in seconds, not retried)."""
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
        return None
    except OSError as exc:
        return f"{url.hostname}: {exc.strerror or exc}"


def locate(name: str) -> tuple[str, bool]:
    """(what from_pretrained opens, whether it comes from the Hub), or a clear error."""
    if name in PRESETS:
        return str(ensure_converted(PRESETS[name])), False
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelNotFound(f"'{name}' is a folder but not a model (no config.json in it)")
        return str(path), False
    if looks_like_hub_id(name):
        if hub_offline():
            raise ModelNotFound(
                f"'{name}' looks like a Hub id, but HF_HUB_OFFLINE is set; use an offline preset "
                f"({', '.join(PRESETS)}) or a local folder"
            )
        return name, True
    raise ModelNotFound(
        f"unknown model '{name}': not an offline preset ({', '.join(PRESETS)}), not a folder, not a Hub id (owner/name)"
    )


def check_precision(dtype: str, device: str = "auto") -> torch.device:
    """The device a model in `dtype` would load on, or why it cannot."""
    if dtype not in DTYPES:
        raise InvalidRequest(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    where = resolve_device(device)
    if dtype == "int8" and where.type != "cpu":
        raise InvalidRequest(f"int8 runs on the CPU only (torch's int8 kernels); use bfloat16 on {where.type}")
    return where


def check_loadable(name: str) -> tuple[str, bool, str | None]:
    """Everything about loading `name` that can fail before any weights are read: (what from_pretrained opens,
    whether it comes from the Hub, why the Hub is unreachable or None). A Hub model with no network and no local
    copy is refused here, so a caller can keep what it holds until a load can actually happen."""
    source, from_hub = locate(name)
    if not from_hub:
        problem = folder_problem(Path(source))
        if problem:
            fix = (
                f"rebuild it with `python -m specviz prepare --rebuild {name}`"
                if name in PRESETS
                else "restore the file or fetch the model again"
            )
            raise ModelLoadError(f"cannot load '{name}': {problem} in {source}; {fix}")
    offline_reason = hub_unreachable_reason() if from_hub else None
    if offline_reason:
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(source, "config.json"), str):
            raise ModelLoadError(
                f"cannot load '{name}': the Hugging Face Hub is not reachable ({offline_reason}) "
                f"and the model is not in the local cache; use an offline preset or a local folder"
            )
    return source, from_hub, offline_reason


def load_tokenizer(source: str, offline_reason: str | None = None):
    """The tokenizer of what check_loadable found; with the Hub unreachable, only from the local cache."""

    return AutoTokenizer.from_pretrained(source, local_files_only=bool(offline_reason))


def placement(where: torch.device) -> dict:
    """How from_pretrained places the weights: on a GPU straight onto it (a device map) in their precision; under
    ZeroGPU (and on a CPU) read on the CPU and moved with .to() after, which the `spaces` package intercepts in the
    main process."""
    return {"device_map": str(where)} if where.type == "cuda" and not zero_gpu() else {}


def _read_weights(source: str, dtype: str, offline_reason, where: torch.device):
    """The model from_pretrained gives. Where loading with a device map fails, the weights are read on the CPU
    instead (moved by the caller), and the model is set to the eager, dynamic-cache path with a line saying why
    (`specviz_load_note`): a race that runs beats a Space that shows an error."""

    kwargs = dict(dtype=DTYPES[dtype], local_files_only=bool(offline_reason))
    mapped = placement(where)
    if not mapped:
        return AutoModelForCausalLM.from_pretrained(source, **kwargs)
    try:
        return AutoModelForCausalLM.from_pretrained(source, **kwargs, **mapped)
    except Exception as exc:  # a device-map failure of any kind; a file that cannot load fails again below
        model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
        model.specviz_static = False
        model.specviz_load_note = (
            f"loading with a device map failed ({first_line(exc)[:160]}); read on the CPU and moved, running the "
            "eager, dynamic-cache path"
        )
        return model


def read_model(name: str, dtype: str = "bfloat16", device: str = "auto", tokenizer=None):
    """(the transformers model in `dtype` on its device, its tokenizer, the device), or one line why not.
    `tokenizer`: the model's, when the caller has already loaded it (load_tokenizer)."""
    where = check_precision(dtype, device)
    source, from_hub, offline_reason = check_loadable(name)
    try:
        # Hub unreachable: only the local Hugging Face cache can still serve it, so do not retry the network.
        tokenizer = tokenizer or load_tokenizer(source, offline_reason)
        model = _read_weights(source, dtype, offline_reason, where)
    except Exception as exc:  # network, missing files, unsupported architecture: one line for the user
        if offline_reason:
            raise ModelLoadError(
                f"cannot load '{name}': the Hugging Face Hub is not reachable ({offline_reason}) "
                f"and the model is not in the local cache; use an offline preset or a local folder"
            ) from exc
        raise ModelLoadError(f"cannot load '{name}': {first_line(exc)[:300]}") from exc
    model.to(where).eval()
    steady_attention(where)
    if dtype == "int8":
        model = int8_rows(model, calibration_ids(tokenizer))
    return model, tokenizer, where


def calibration_ids(tokenizer) -> list[int]:
    """The ids of the text an int8 model's smoothing measures its input channels on (smoothing.CALIBRATION)."""

    return tokenizer.encode(CALIBRATION, add_special_tokens=False)


def encode_prompt(loaded: LoadedModel, text: str | list[dict], chat: bool = True) -> list[int]:
    """Token ids for a user prompt, or for a conversation given as [{"role", "content"}, ...] ending with the
    user's turn: the chat template when the tokenizer has one (unless chat=False), else the plain text. A template
    that can think aloud first (Qwen3's) is told not to: the race is about decoding an answer."""
    tok = loaded.tokenizer
    messages = [{"role": "user", "content": text}] if isinstance(text, str) else text
    if chat and getattr(tok, "chat_template", None):
        rendered = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, enable_thinking=False)
        ids = tok.encode(rendered, add_special_tokens=False)
    else:
        ids = tok.encode("\n\n".join(m["content"] for m in messages))
    if len(ids) >= loaded.context_length:
        raise InvalidRequest(f"the prompt is {len(ids)} tokens; the model's context holds {loaded.context_length}")
    if not ids:
        raise InvalidRequest("the prompt encodes to no tokens")
    return ids
