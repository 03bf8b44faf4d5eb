"""Damaged model files and a cache that cannot be written: one line that names the file and the fix, never a
half-loaded model, nothing half-written left behind. An offline preset here is a stand-in: a package of one part on
sys.path, converted by saving the tiny model (the real conversion of a GGUF takes minutes)."""

import errno
import hashlib
import shutil
from pathlib import Path

import pytest

import specviz.models.offline as offline
from specviz.cli import main
from specviz.errors import ModelLoadError, OfflinePackageError
from specviz.models.offline import PRESETS, OfflinePreset, converted_path
from specviz.runtimes.transformers_runtime import load_model

NAME = "stand-in-preset"


def one_line(exc) -> str:
    text = str(exc.value)
    assert "\n" not in text and "Traceback" not in text
    return text


@pytest.fixture()
def folder(model_folder, tmp_path) -> Path:
    """A copy of the tiny model's folder, to damage."""
    return Path(shutil.copytree(model_folder, tmp_path / "model"))


def test_a_truncated_weights_file_is_refused_naming_it(folder):
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1000])
    with pytest.raises(ModelLoadError) as refused:
        load_model(str(folder), "float32", "cpu")
    assert "model.safetensors is" in one_line(refused) and "restore the file" in str(refused.value)


def test_a_damaged_header_and_a_missing_tokenizer_are_refused_naming_them(folder):
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ModelLoadError, match="the tokenizer is missing") as refused:
        load_model(str(folder), "float32", "cpu")
    one_line(refused)
    (folder / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}......")
    (folder / "vocab.json").write_text("{}")  # a tokenizer file again: now the weights are what is wrong
    with pytest.raises(ModelLoadError, match="model.safetensors is not a readable safetensors file"):
        load_model(str(folder), "float32", "cpu")


@pytest.fixture()
def stand_in(model_folder, tmp_path, monkeypatch):
    """A preset whose one part is a package on sys.path and whose conversion saves the tiny model; the cache in
    tmp_path. Returns the part's path."""
    package = tmp_path / "packages" / "specviz_stand_in_part1"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    part = package / "data" / "part01.bin"
    part.write_bytes(b"a stand-in for a GGUF file" * 100)
    monkeypatch.syspath_prepend(str(package.parent))
    monkeypatch.setitem(
        PRESETS,
        NAME,
        OfflinePreset(
            NAME,
            (("specviz_stand_in_part1", "data/part01.bin"),),
            hashlib.sha256(part.read_bytes()).hexdigest(),
            ("specviz-stand-in-part1",),
        ),
    )
    monkeypatch.setenv(offline.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(offline, "_dequantise", lambda gguf, out: shutil.copytree(model_folder, out))
    return part


def test_a_damaged_cache_entry_names_the_file_and_is_rebuilt_on_request(stand_in, capsys):
    assert load_model(NAME, "float32", "cpu").model is not None  # converted once, loads
    cached = converted_path(PRESETS[NAME])
    (cached / "tokenizer.json").unlink()
    with pytest.raises(ModelLoadError, match="tokenizer.json is missing") as refused:
        load_model(NAME, "float32", "cpu")
    assert f"python -m specviz prepare --rebuild {NAME}" in one_line(refused)
    assert main(["prepare", "--rebuild", NAME]) == 0
    weights = cached / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(ModelLoadError, match="model.safetensors is") as refused:
        load_model(NAME, "float32", "cpu")
    one_line(refused)
    assert main(["prepare", "--rebuild", NAME]) == 0
    assert load_model(NAME, "float32", "cpu").model is not None


def test_a_package_that_fails_its_checksum_changes_nothing_in_the_cache(stand_in):
    load_model(NAME, "float32", "cpu")
    before = sorted(p.name for p in converted_path(PRESETS[NAME]).iterdir())
    stand_in.write_bytes(b"something else" * 100)
    with pytest.raises(OfflinePackageError, match="failed its checksum") as refused:
        offline.ensure_converted(PRESETS[NAME], rebuild=True)
    assert "reinstall its packages" in one_line(refused)
    assert sorted(p.name for p in converted_path(PRESETS[NAME]).iterdir()) == before
    assert load_model(NAME, "float32", "cpu").model is not None  # the cache entry is still whole


@pytest.mark.parametrize("fault", ["disk full", "read-only"])
def test_a_cache_that_cannot_be_written_leaves_nothing_half_written(stand_in, monkeypatch, fault):
    if fault == "disk full":

        def fill(gguf, out):
            out.mkdir()
            (out / "model.safetensors").write_bytes(b"half")
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(offline, "_dequantise", fill)
    else:

        def refuse(self, *args, **kwargs):
            raise OSError(errno.EROFS, "Read-only file system")

        monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(OfflinePackageError) as refused:
        load_model(NAME, "float32", "cpu")
    text = one_line(refused)
    assert ("No space left on device" if fault == "disk full" else "Read-only file system") in text
    assert "SPECVIZ_CACHE" in text
    cache = converted_path(PRESETS[NAME]).parent
    assert not cache.exists() or list(cache.iterdir()) == []  # no folder, no temporary leftovers
