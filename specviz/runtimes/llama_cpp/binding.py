"""llama.cpp as specviz reaches it: llama-cpp-python's low-level API (ctypes over libllama), imported once, behind a
typed error when it is not installed, and the few calls the runtime makes: a context over a loaded GGUF, one batch
fed to it, the logits of every position that asked for them, and a sequence's cache cut or copied.
"""

import ctypes
import os
import threading

import numpy as np

from ...errors import InvalidRequest, LlamaCppMissing

INSTALL = 'pip install "specviz[llama]" (builds llama.cpp from source, about 4 minutes on 2 cores)'
MAX_SEQUENCES = 256  # llama.cpp's own bound on a context's sequence ids (LLAMA_MAX_SEQ)
MICRO_BATCH = 512  # tokens per forward when a prompt is read, as llama.cpp's own tools read one (n_ubatch)

_lock = threading.Lock()
_library = None
_silent = None  # the log callback handed to llama.cpp, kept alive as long as the process


def library():
    """The llama_cpp module, its backend initialised once and its log lines kept out of specviz's one-line output;
    LlamaCppMissing in one line when it is not installed."""
    global _library, _silent
    with _lock:
        if _library is None:
            try:
                import llama_cpp
            except ImportError as exc:
                raise LlamaCppMissing(f"llama.cpp is not installed ({exc}); {INSTALL}") from None
            except OSError as exc:  # the package is there but its compiled library does not load on this CPU
                raise LlamaCppMissing(f"llama.cpp's library does not load here ({exc}); reinstall: {INSTALL}") from None
            _silent = llama_cpp.llama_log_callback(lambda level, text, data: None)
            llama_cpp.llama_log_set(_silent, ctypes.c_void_p(0))
            llama_cpp.llama_backend_init()
            _library = llama_cpp
        return _library


def installed() -> bool:
    try:
        library()
    except LlamaCppMissing:
        return False
    return True


def kernels() -> str:
    """The CPU features llama.cpp was built to use ("AVX2 FMA F16C ..."), from its own system line: a forward's cost
    depends on them as much as on the CPU."""
    line = library().llama_print_system_info().decode(errors="replace")
    found = [part.split("=")[0].split(":")[-1].strip() for part in line.split("|") if part.strip().endswith("= 1")]
    return " ".join(found)


def threads() -> int:
    """The threads llama.cpp computes with: every CPU this process may run on, as llama.cpp's tools take them on a
    machine whose CPUs are its cores (the 2-core machines this project measures on)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class Context:
    """One llama.cpp context over a loaded model: a unified KV cache of up to MAX_SEQUENCES sequences that share
    cells (a token may belong to several: a tree's shared prefix), and a batch buffer reused by every forward."""

    def __init__(self, model_handle, n_ctx: int, vocab: int):
        lib = library()
        params = lib.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = MICRO_BATCH
        params.n_threads = params.n_threads_batch = threads()
        params.n_seq_max = MAX_SEQUENCES
        params.kv_unified = True  # one cache for every sequence: tree branches see their shared prefix's cells
        params.no_perf = True
        self.handle = lib.llama_init_from_model(model_handle, params)
        if not self.handle:
            raise MemoryError(f"llama.cpp could not make a context of {n_ctx} tokens")
        self.n_ctx = n_ctx
        self.vocab = vocab
        self.lib = lib
        self.memory = lib.llama_get_memory(self.handle)
        self._batch = lib.llama_batch_init(MICRO_BATCH, 0, MAX_SEQUENCES)

    def forward(self, tokens, positions, sequences, outputs) -> np.ndarray:
        """Feed one batch: token i at positions[i] in the sequences `sequences[i]`; the logits of the rows where
        outputs[i] holds, in their order, as an [n_out, V] float32 array of its own. At most MICRO_BATCH tokens."""
        batch = self._batch
        n = len(tokens)
        assert 0 < n <= MICRO_BATCH
        batch.n_tokens = n
        for i in range(n):
            batch.token[i] = tokens[i]
            batch.pos[i] = positions[i]
            seqs = sequences[i]
            batch.n_seq_id[i] = len(seqs)
            row = batch.seq_id[i]
            for j, s in enumerate(seqs):
                row[j] = s
            batch.logits[i] = 1 if outputs[i] else 0
        code = self.lib.llama_decode(self.handle, batch)
        if code != 0:
            raise RuntimeError(f"llama.cpp refused a batch of {n} tokens (llama_decode returned {code})")
        wanted = sum(1 for o in outputs if o)
        if not wanted:
            return np.empty((0, self.vocab), dtype=np.float32)
        pointer = self.lib.llama_get_logits(self.handle)
        return np.ctypeslib.as_array(pointer, shape=(wanted, self.vocab)).copy()

    def remove(self, sequence: int, start: int = -1, end: int = -1) -> None:
        """Forget `sequence`'s cells at positions [start, end) (-1: open-ended); a cell no sequence holds is free."""
        self.lib.llama_memory_seq_rm(self.memory, sequence, start, end)

    def share(self, source: int, destination: int, start: int = -1, end: int = -1) -> None:
        """Let `destination` hold `source`'s cells at positions [start, end) too (no copy: the cells are shared)."""
        self.lib.llama_memory_seq_cp(self.memory, source, destination, start, end)

    def clear(self) -> None:
        self.lib.llama_memory_clear(self.memory, True)

    def close(self) -> None:
        if self.handle:
            self.lib.llama_batch_free(self._batch)
            self.lib.llama_free(self.handle)
            self.handle = None


class Sequences:
    """The sequence ids of one context that a caller hands out (from `first` up) and takes back, forgetting a
    returned sequence's cells; `what` names the caller's unit of work in the error when none is left."""

    def __init__(self, ctx: Context, first: int, what: str):
        self.ctx = ctx
        self.what = what
        self._free = list(range(MAX_SEQUENCES - 1, first - 1, -1))

    def __len__(self) -> int:
        return len(self._free)

    def take(self) -> int:
        if not self._free:
            raise InvalidRequest(f"{self.what} needs more sequences than llama.cpp's {MAX_SEQUENCES}")
        return self._free.pop()

    def give_back(self, sequence: int) -> None:
        self.ctx.remove(sequence)
        self._free.append(sequence)
