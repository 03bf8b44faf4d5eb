"""specviz as a package, installed as a user installs it: `pip install .` of this checkout into a fresh virtual
environment gives a `specviz` command and an import that work from any folder, with the assets (shipped heads,
prompts, model configs) inside the environment; and its dependencies are the requirements files' pins, declared once
in each place and held together here."""

import json
import os
import site
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


def test_the_cluster_extra_is_its_requirements_file_and_never_the_spaces():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["optional-dependencies"]["cluster"] == pins(ROOT / "requirements-cluster.txt")
    space = pins(ROOT / "requirements.txt") + pins(ROOT / "requirements-app.txt")
    assert not [p for p in space if p.startswith("ray")]


def test_the_llama_extra_is_its_requirements_file_and_never_the_spaces():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["optional-dependencies"]["llama"] == pins(ROOT / "requirements-llama.txt")
    space = pins(ROOT / "requirements.txt") + pins(ROOT / "requirements-app.txt")
    assert not [p for p in space if p.startswith("llama")]


def build_leftovers(root: Path) -> set[str]:
    """What a build may leave in the folder it builds from: the top-level entries and any egg-info beside the code."""
    return {p.name for p in root.iterdir()} | {p.relative_to(root).as_posix() for p in root.glob("*/*.egg-info")}


def elsewhere(*command: str, folder: Path) -> subprocess.CompletedProcess:
    """A command run from `folder`, far from the checkout, with no PYTHONPATH: only what is installed is importable."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def venv(tmp_path_factory, new_process) -> tuple[Path, Path]:
    """A fresh virtual environment with this checkout installed by its own pip, as `pip install .`: (the environment,
    its site-packages). It sees this environment's packages (torch and the rest), so nothing is fetched."""
    home = tmp_path_factory.mktemp("package")
    env = home / "venv"
    new_process("-m", "venv", "--system-site-packages", str(env), check=True, timeout=300)
    found = elsewhere(
        str(env / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", folder=home
    )
    assert found.returncode == 0, found.stderr
    packages = Path(found.stdout.strip())
    if sys.prefix != sys.base_prefix:  # run from a virtual environment: its packages are not the system's, so add them
        (packages / "outer.pth").write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
    before = build_leftovers(ROOT)
    install = [str(env / "bin" / "pip"), "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", str(ROOT)]
    done = elsewhere(*install, "--disable-pip-version-check", folder=home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert build_leftovers(ROOT) == before, "the install left files in the checkout"
    return env, packages


@pytest.mark.budget(45, "the installed command and `import specviz` each start a new Python with torch")
def test_the_installed_command_and_import_work_from_another_folder(venv, tmp_path):
    env, packages = venv
    done = elsewhere(str(env / "bin" / "specviz"), "generate", "--help", folder=tmp_path)
    assert done.returncode == 0 and "--drafter" in done.stdout, done.stderr
    done = elsewhere(
        str(env / "bin" / "python"), "-c", "import specviz, specviz.paths as r; print(r.ASSETS)", folder=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == packages / "specviz" / "assets", done.stdout
    code = (
        "import json, sys, specviz, specviz.drafters.eagle.eagle_checkpoint as e; "
        "print(json.dumps({'package': specviz.__file__, 'path': sys.path, "
        "'heads': str(e.shipped_eagle('qwen2.5-coder-1.5b-instruct'))}))"
    )
    done = elsewhere(str(env / "bin" / "python"), "-c", code, folder=tmp_path)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert Path(seen["package"]).is_relative_to(packages)
    assert not [p for p in seen["path"] if p and Path(p).resolve() == ROOT], seen["path"]
    heads = Path(seen["heads"])
    assert heads.is_relative_to(packages) and (heads / "model.safetensors").is_file()
    assert (packages / "specviz" / "assets" / "prompts.json").is_file()


def test_a_bad_flag_from_the_installed_command_is_one_line(venv, tmp_path):
    env, _ = venv
    done = elsewhere(str(env / "bin" / "specviz"), "generate", "--gamma", "0", folder=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: ")
