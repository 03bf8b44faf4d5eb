"""Offline presets: a missing package or a corrupted part gives one clear error, nothing half-written."""

import hashlib
import importlib

import pytest

from specviz.cli import main
from specviz.models import offline
from specviz.models.offline import OfflinePreset, ensure_converted


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """A package `specviz_fake_parts` holding two data parts, importable but never imported."""
    pkg = tmp_path / "site" / "specviz_fake_parts" / "data"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("raise RuntimeError('offline packages must not be imported')\n")
    (pkg / "part01.bin").write_bytes(b"GGUF-part-one ")
    (pkg / "part02.bin").write_bytes(b"and part two")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    return hashlib.sha256(b"GGUF-part-one and part two").hexdigest()


def preset(sha, module="specviz_fake_parts"):
    return OfflinePreset(
        "fake-model",
        ((module, "data/part01.bin"), (module, "data/part02.bin")),
        sha,
        ("fake-parts==1", "fake-parts==1"),
    )


def test_parts_are_joined_and_checked(fake_package, tmp_path):
    dest = offline.assemble(preset(fake_package), tmp_path / "joined.gguf")
    assert dest.read_bytes() == b"GGUF-part-one and part two"


def test_checksum_failure_is_one_clear_error(fake_package, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(offline.PRESETS, "fake-model", preset("0" * 64))
    code = main(["generate", "--target", "fake-model", "--prompt", "hi"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("error: offline model 'fake-model' failed its checksum")
    assert not (tmp_path / "cache" / "fake-model").exists()  # nothing half-converted left behind


def test_missing_package_is_one_clear_error(fake_package, monkeypatch, capsys):
    monkeypatch.setitem(offline.PRESETS, "fake-model", preset(fake_package, module="specviz_not_installed"))
    code = main(["generate", "--target", "fake-model", "--prompt", "hi"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("error: offline model 'fake-model' needs packages that are not installed: fake-parts==1")


def test_converted_cache_is_reused(fake_package, tmp_path):
    folder = tmp_path / "cache" / "fake-model"
    folder.mkdir(parents=True)
    (folder / "specviz-source.json").write_text("{}")
    assert ensure_converted(preset("not-checked-again")) == folder
