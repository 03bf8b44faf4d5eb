"""A GGUF file loaded in llama.cpp: found by name (an offline preset's own file, joined
from its packages once, or any .gguf a user points at), checked before llama.cpp reads it, its tokenizer read from
the same file, and contexts lent to each generation and taken back.
"""

import ctypes
import threading
from pathlib import Path

import torch
from transformers import AutoTokenizer

from ...errors import ModelLoadError, ModelNotFound, OfflinePackageError, RuntimeUnsupported
from ...models.offline import PRESETS, converted_path, gguf_folder, locate_parts, preset_file
from .binding import Context, library, threads
from .llama_lm import LlamaLM
from .llama_rows import LlamaRows

GGUF_MAGIC = b"GGUF"
CONTEXT_STEP = 1024  # contexts are made in sizes rounded up to this, so later generations reuse them
FREE_CONTEXTS = 4  # contexts kept for reuse per model: two sides of a race, and a draft's


def gguf_problem(name: str) -> str:
    """Why `name` has no GGUF file for llama.cpp to read ('' when it has one): an offline preset whose packages are
    missing, a folder without exactly one .gguf, a model that is not a file at all (a Hub id, a transformers folder)."""
    if name in PRESETS:
        try:
            locate_parts(PRESETS[name])
        except OfflinePackageError as exc:
            return str(exc)
        return ""
    path = Path(name).expanduser()
    found = sorted(path.glob("*.gguf")) if path.is_dir() else [path] if path.suffix == ".gguf" else []
    if len(found) != 1 or not found[0].is_file():
        return f"'{name}' is not a GGUF file (llama.cpp reads GGUF; transformers reads folders and Hub ids)"
    return ""


def locate_gguf(name: str) -> Path:
    """The GGUF file `name` means: an offline preset, a .gguf file, or a folder holding exactly one; else one line."""
    if name in PRESETS:
        return preset_file(name)
    path = Path(name).expanduser()
    if path.is_dir():
        found = sorted(path.glob("*.gguf"))
        if len(found) != 1:
            raise ModelNotFound(
                f"'{name}' is a folder with {len(found)} .gguf files; the llama.cpp runtime needs one GGUF file"
            )
        path = found[0]
    if not path.is_file():
        raise ModelNotFound(
            f"'{name}' is not an offline preset ({', '.join(PRESETS)}) nor a GGUF file; the llama.cpp runtime reads "
            "GGUF files (a path to a .gguf)"
        )
    check_gguf(path)
    return path


def check_gguf(path: Path) -> None:
    """A file llama.cpp can at least start reading: the GGUF magic, and more than a header."""
    try:
        with open(path, "rb") as f:
            head = f.read(24)
    except OSError as exc:
        raise ModelLoadError(f"cannot read {path}: {exc.strerror or exc}") from None
    if head[:4] != GGUF_MAGIC:
        raise ModelLoadError(f"{path} is not a GGUF file (it starts with {head[:4]!r}, not {GGUF_MAGIC!r})")
    if len(head) < 24:
        raise ModelLoadError(f"{path} is a damaged GGUF file: it ends inside its header ({len(head)} bytes)")


def load_tokenizer(name: str, path: Path):
    """The model's tokenizer: beside its GGUF when the folder holds one (tokenizer_config.json), else read from the
    GGUF by transformers once and kept in the cache folder (an offline preset's converted folder holds it already)."""

    converted = converted_path(PRESETS[name]) if name in PRESETS else path.parent
    if (converted / "tokenizer_config.json").is_file():
        return AutoTokenizer.from_pretrained(converted)
    stat = path.stat()
    kept = gguf_folder() / "tokenizers" / f"{path.stem}-{stat.st_size}"
    if (kept / "tokenizer_config.json").is_file():
        return AutoTokenizer.from_pretrained(kept)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    except Exception as exc:  # a GGUF whose vocabulary transformers cannot read: one line
        raise ModelLoadError(f"cannot read the tokenizer of {path}: {str(exc).splitlines()[0][:200]}") from exc
    try:
        tokenizer.save_pretrained(kept)
    except OSError:  # a read-only cache: read from the GGUF again next time
        pass
    return tokenizer


class GgufModel:
    """A GGUF loaded by llama.cpp (memory-mapped, as llama.cpp's tools load it), and the contexts its generations
    use. The engine asks it for a cache (`open_lm`, `open_batch`) as it would open one on a transformers model."""

    def __init__(self, path: Path):
        lib = library()
        params = lib.llama_model_default_params()
        self.handle = lib.llama_model_load_from_file(str(path).encode(), params)
        if not self.handle:
            raise ModelLoadError(f"llama.cpp could not load {path}: a damaged or unsupported GGUF file")
        self.path = path
        self.lib = lib
        self.vocab_handle = lib.llama_model_get_vocab(self.handle)
        self.vocab = lib.llama_vocab_n_tokens(self.vocab_handle)
        self.context_length = lib.llama_model_n_ctx_train(self.handle)
        self.device = torch.device("cpu")
        self.dtype = torch.float32  # the logits it hands back
        self.threads = threads()
        self._free: list[Context] = []
        self._lock = threading.Lock()
        self.forward_curve: dict[int, float] = {}  # measured by load_gguf (costs.forward_curve)

    def describe(self) -> str:
        """llama.cpp's own words for it: architecture, size and quantisation ("qwen2 1.5B Q4_K - Medium")."""
        out = ctypes.create_string_buffer(128)
        self.lib.llama_model_desc(self.handle, out, 128)
        return out.value.decode(errors="replace")

    def entry_bytes(self) -> int:
        """What one token keeps in a context's cache: keys and values of every layer, float16 (llama.cpp's own)."""
        lib = self.lib
        m = self.handle
        head = lib.llama_model_n_embd(m) // max(1, lib.llama_model_n_head(m))
        return 2 * lib.llama_model_n_layer(m) * lib.llama_model_n_head_kv(m) * head * 2

    def end_of_text(self) -> frozenset[int]:
        """The ids llama.cpp ends a generation at (its end-of-generation tokens)."""
        return frozenset(t for t in range(self.vocab) if self.lib.llama_vocab_is_eog(self.vocab_handle, t))

    def take_context(self, capacity: int) -> Context:
        """A context with room for `capacity` tokens: a free one that fits, else a new one rounded up."""
        with self._lock:
            fits = [c for c in self._free if c.n_ctx >= capacity]
            if fits:
                chosen = min(fits, key=lambda c: c.n_ctx)
                self._free.remove(chosen)
                return chosen
        size = min(-(-capacity // CONTEXT_STEP) * CONTEXT_STEP, max(capacity, self.context_length))
        return Context(self.handle, size, self.vocab)

    def give_context(self, context: Context) -> None:
        """A generation is done with `context`: emptied and kept for the next (the largest few)."""
        if context.handle is None:
            return
        context.clear()
        with self._lock:
            self._free.append(context)
            self._free.sort(key=lambda c: -c.n_ctx)
            while len(self._free) > FREE_CONTEXTS:
                self._free.pop().close()

    def open_lm(self, capacity: int, keep_hidden=False):

        if keep_hidden:
            raise RuntimeUnsupported("llama.cpp does not hand specviz the target's hidden states a head reads")
        return LlamaLM(self, capacity)

    def open_batch(self, capacity: int = 0):

        return LlamaRows(self, capacity)
