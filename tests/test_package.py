"""specviz as a package: the wheel pyproject.toml builds gives a `specviz` command and an import that work from any
folder, with the assets (shipped heads, prompts, model configs) inside it; and its dependencies are the requirements
files' pins, declared once in each place and held together here."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pins(path: Path) -> list[str]:
    """The requirement lines of a requirements file (no comments, options or includes)."""
    lines = (line.split("#")[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def test_the_declared_dependencies_are_the_requirements_files():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    assert declared == [*pins(ROOT / "requirements-cpu.txt"), *pins(ROOT / "requirements-app.txt")]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel built from this checkout, installed alone (its dependencies are this environment's) in a folder."""
    out = tmp_path_factory.mktemp("package")
    run = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)]
    subprocess.run(run, check=True, capture_output=True)
    wheel = next(out.glob("specviz-*.whl"))
    site = out / "site"
    run = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)]
    subprocess.run(run, check=True, capture_output=True)
    return site


def elsewhere(site: Path, *command: str, folder: Path) -> subprocess.CompletedProcess:
    """A command run from `folder`, far from the checkout, seeing the installed package and nothing of the repo."""
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=120)


def test_the_installed_command_and_import_work_from_another_folder(installed, tmp_path):
    done = elsewhere(installed, str(installed / "bin" / "specviz"), "generate", "--help", folder=tmp_path)
    assert done.returncode == 0 and "--drafter" in done.stdout, done.stderr
    code = (
        "import specviz.runtime as r, specviz.drafters.eagle.checkpoint as e; "
        "print(r.ASSETS); print(e.shipped_eagle('qwen2.5-coder-1.5b-instruct'))"
    )
    done = elsewhere(installed, sys.executable, "-c", code, folder=tmp_path)
    assets, heads = done.stdout.split()
    assert Path(assets) == installed / "specviz" / "assets" and (Path(assets) / "prompts.json").is_file()
    assert Path(heads).is_relative_to(installed) and (Path(heads) / "model.safetensors").is_file()


def test_a_bad_flag_from_the_installed_command_is_one_line(installed, tmp_path):
    done = elsewhere(installed, str(installed / "bin" / "specviz"), "generate", "--gamma", "0", folder=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().startswith("error: ")
