"""The repository as a Hugging Face Space: the Hub's rules on the front matter and on files (scripts/check_space.py),
run on the real repository, and on copies broken the ways the Hub refuses."""

import io
import shutil
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "scripts" / "check_space.py"


def run_check(run, root: Path) -> subprocess.CompletedProcess:
    """The check as a user runs it, in a process of its own (`run`: the new_process fixture)."""
    return run(str(CHECK), str(root), timeout=120)


def check(root: Path) -> subprocess.CompletedProcess:
    """The same check's main() in this process (a new process spends seconds importing the app to read its pairs):
    its exit code and what it printed."""
    sys.path.insert(0, str(CHECK.parent))
    from check_space import main

    printed = io.StringIO()
    with redirect_stdout(printed):
        code = main([str(root)])
    return subprocess.CompletedProcess([str(CHECK), str(root)], code, printed.getvalue(), "")


@pytest.fixture()
def space_copy(tmp_path):
    """What a Space upload holds, copied from the repository, to break one rule at a time."""
    sys.path.insert(0, str(CHECK.parent))
    from check_space import space_files

    for name in space_files(ROOT):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / name)
    return tmp_path


def front_matter_with(root: Path, key: str, value: str) -> None:
    readme = root / "README.md"
    lines = readme.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(f"{key}:"))
    lines[at] = f"{key}: {value}\n"
    readme.write_text("".join(lines), encoding="utf-8")


def test_the_repository_is_a_space_the_hub_accepts(new_process):
    done = run_check(new_process, ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("ok: ")


def test_the_copy_passes_before_it_is_broken(space_copy):
    done = check(space_copy)
    assert done.returncode == 0, done.stdout


def test_a_61_character_description_is_refused_in_one_line(space_copy):
    front_matter_with(space_copy, "short_description", "x" * 61)
    done = check(space_copy)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        f"error: front matter: `short_description` is 61 characters; the Hub allows 60: '{'x' * 61}'"
    ]


def test_a_12_mb_file_outside_lfs_is_refused_and_routed_it_passes(space_copy):
    big = space_copy / "assets" / "table.csv"  # text, so only its size breaks the rule
    big.write_text("0123456789abcdef\n" * (12 * 2**20 // 17))
    done = check(space_copy)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "error: assets/table.csv: 12.0 MB and not routed through LFS by .gitattributes (the Hub refuses plain files "
        "over 10 MB)"
    ]
    with open(space_copy / ".gitattributes", "a") as f:
        f.write("*.csv filter=lfs diff=lfs merge=lfs -text\n")
    assert check(space_copy).returncode == 0


def test_a_small_binary_file_outside_lfs_is_refused(space_copy):
    (space_copy / "assets" / "weights.npy").write_bytes(b"\x93NUMPY\x01\x00" + bytes(range(256)))
    done = check(space_copy)
    assert done.returncode == 1 and "assets/weights.npy: a binary file not routed through LFS" in done.stdout


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("colorFrom", "teal", "`colorFrom` must be one of"),
        ("suggested_hardware", "h100", "`suggested_hardware` 'h100' is not a Space hardware flavor"),
        ("sdk_version", "5.0.0", "`sdk_version` 5.0.0 is not the pinned gradio"),
        ("python_version", "3.11", "`python_version` must be a quoted string"),
        ("app_file", "main.py", "`app_file` main.py does not exist"),
    ],
)
def test_front_matter_values_the_hub_or_the_space_refuse(space_copy, key, value, expected):
    front_matter_with(space_copy, key, value)
    done = check(space_copy)
    assert done.returncode == 1 and expected in done.stdout and len(done.stdout.splitlines()) == 1, done.stdout


def test_models_must_list_exactly_what_the_presets_load(space_copy):
    readme = space_copy / "README.md"
    text = readme.read_text(encoding="utf-8")
    readme.write_text(text.replace("  - double7/vicuna-68m\n", "  - not a/valid id\n"), encoding="utf-8")
    out = check(space_copy).stdout
    assert "`models` entry 'not a/valid id' is not a Hub model id" in out
    assert "the app loads double7/vicuna-68m but `models` does not list it" in out


def test_tests_and_scripts_stay_out_of_the_upload_and_the_readmes_pages_go():
    sys.path.insert(0, str(CHECK.parent))
    from check_space import readme_links, space_files

    files = space_files(ROOT)
    assert "app.py" in files and "assets/eagle/qwen2.5-coder-1.5b-instruct/model.safetensors" in files
    assert not [f for f in files if f.split("/")[0] in ("tests", "scripts", ".ci") or "__pycache__" in f]
    links = readme_links(ROOT)
    assert "docs/img/race.png" in links and "docs/design.md" in links and set(links) <= set(files)


def test_a_readme_picture_the_upload_would_not_carry_fails_the_check(space_copy):
    """The README is the Space's own page: a picture or link to a file the upload leaves out shows broken there."""
    readme = space_copy / "README.md"
    (space_copy / "scripts").mkdir(exist_ok=True)
    (space_copy / "scripts" / "shot.png").write_bytes((space_copy / "docs" / "img" / "race.png").read_bytes())
    text = readme.read_text(encoding="utf-8")
    readme.write_text(text + "\n![a shot](scripts/shot.png) and [a page](docs/missing.md#part)\n", encoding="utf-8")
    out = check(space_copy).stdout
    assert "README.md links scripts/shot.png, which the Space upload does not carry" in out
    assert "README.md links docs/missing.md, which the Space upload does not carry" in out


@pytest.mark.parametrize("hardware", ["l4x1", "zero-a10g"])
def test_the_upload_folder_is_built_and_passes_the_check(tmp_path, hardware, new_process):
    out = tmp_path / "space"
    done = new_process(
        str(ROOT / "scripts" / "push_space.py"), "--dry-run", "--out", str(out), "--hardware", hardware, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert (out / "assets" / "medusa").is_dir() and not (out / "tests").exists()
    assert (out / "docs" / "img" / "race.png").is_file()  # the Space's page shows it
    requirements = (out / "requirements.txt").read_text()
    if hardware == "l4x1":
        assert "torch==2.13.0+cu129" in requirements and "whl/cu129" in requirements
    else:  # a torch version ZeroGPU supports, and the Python it runs
        assert "torch==2.11.0" in requirements and "--extra-index-url" not in requirements
        assert 'python_version: "3.12"' in (out / "README.md").read_text(encoding="utf-8")
    assert check(out).returncode == 0
