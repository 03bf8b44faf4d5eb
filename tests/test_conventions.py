"""Conventions the code keeps that no linter checks: a drafter's name is spelled only in its own module (and the
registry), everyone else asks the registry what a drafter declares; no function or module is longer than a reader can
hold at once; no two modules share a file name; the top of the package holds only the few types everything stands
on; and every script says in one line, in scripts/README.md too, what it is for and who runs it."""

import ast
import re
from pathlib import Path

from specviz.drafters.registry import kinds

ROOT = Path(__file__).resolve().parents[1]

# "draft" also names one model of a pair (beside "target") and one phase of a step's time (beside "verify" and
# "overhead"). As a dict key in these files it means one of those, never the drafter.
OTHER_MEANINGS = {
    ("specviz/cli/__init__.py", "draft"): "a trace's model names: target and draft",
    ("specviz/app/backend.py", "draft"): "the same model names, for a trace the app records",
    ("specviz/render/report.py", "draft"): "the same model names, as a workload report lists them",
    ("specviz/analysis/diagnosis.py", "draft"): "the phases a step's time is split into, and what each costs",
    ("specviz/render/charts.py", "draft"): "the colours of those phases",
}


def scanned(root: Path) -> list[Path]:
    """Every module outside specviz/drafters/ and specviz/training/ (which trains named drafters, one module each):
    the package, the app and the scripts."""
    own = ("drafters", "training")
    package = [p for p in (root / "specviz").rglob("*.py") if p.relative_to(root / "specviz").parts[0] not in own]
    return sorted([*package, *[root / "app.py"], *(root / "scripts").glob("*.py")])


def spelled_names(path: Path, root: Path, names: set[str]) -> list[str]:
    """file:line of each string literal in `path` that is a drafter's name (but an allowed other meaning)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    keys = {id(k) for node in ast.walk(tree) if isinstance(node, ast.Dict) for k in node.keys if k is not None}
    where = path.relative_to(root).as_posix()
    return [
        f"{where}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and node.value in names
        and not (id(node) in keys and (where, node.value) in OTHER_MEANINGS)
    ]


def test_drafter_names_are_spelled_only_by_the_drafters():
    names = {k.name for k in kinds()}
    found = [hit for path in scanned(ROOT) for hit in spelled_names(path, ROOT, names)]
    assert not found, "a drafter named outside specviz/drafters/ (ask the registry instead):\n" + "\n".join(found)


def test_the_check_finds_a_name_and_allows_only_the_other_meanings(tmp_path):
    name = kinds()[0].name
    made = ("specviz/cli/__init__.py", "specviz/bench/new.py", "app.py", "scripts/new.py", "specviz/drafters/new.py")
    for rel in made:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f"run({name!r})\nmodels = {{'draft': 1}}\n")
    found = [hit for path in scanned(tmp_path) for hit in spelled_names(path, tmp_path, {name, "draft"})]
    assert f"specviz/bench/new.py:1: {name!r}" in found and f"scripts/new.py:1: {name!r}" in found
    assert f"app.py:1: {name!r}" in found and not any(hit.startswith("specviz/drafters/") for hit in found)
    assert "specviz/cli/__init__.py:2: 'draft'" not in found and "specviz/bench/new.py:2: 'draft'" in found


MOST_NAMES = 4  # kind names one module may spell: a kind's own module names itself and the kinds it holds


def names_listed(path: Path, names: set[str]) -> set[str]:
    """The drafter names `path` spells as string literals (a list of the kinds is a second registry)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in names}


def test_no_module_lists_the_drafters_but_the_registry():
    names = {k.name for k in kinds()}
    own = {ROOT / "specviz" / "drafters" / "registry.py"}
    listed = {
        path.relative_to(ROOT).as_posix(): sorted(found)
        for path in (ROOT / "specviz").rglob("*.py")
        if path not in own and len(found := names_listed(path, names)) > MOST_NAMES
    }
    assert not listed, f"modules that list the drafters by name (declare it in each kind instead): {listed}"


def test_the_listing_check_counts_the_names_a_module_spells(tmp_path):
    names = {k.name for k in kinds()}
    listing = tmp_path / "methods.py"
    listing.write_text(f"METHODS = {dict.fromkeys(sorted(names), 1)!r}\nOTHER = 'no drafter'\n")
    assert names_listed(listing, names) == names and len(names) > MOST_NAMES


LONGEST_FUNCTION = 80  # lines, as ruff formats them, docstring included


def long_functions(path: Path, root: Path, longest: int = LONGEST_FUNCTION) -> list[str]:
    """file:line name (length) of every function or method in `path` over `longest` lines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    where = path.relative_to(root).as_posix()
    return [
        f"{where}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > longest
    ]


def every_module(root: Path) -> list[Path]:
    return sorted([*(root / "specviz").rglob("*.py"), root / "app.py", *(root / "scripts").glob("*.py"),
                   *(root / "tests").glob("*.py")])  # fmt: skip


def test_no_function_is_longer_than_80_lines():
    found = [hit for path in every_module(ROOT) for hit in long_functions(path, ROOT)]
    assert not found, "split these by what they do:\n" + "\n".join(found)


ENGINE_LONGEST = 60  # the decode loop and what it calls are read most: shorter still


def test_no_function_in_the_engine_is_longer_than_60_lines():
    engine = sorted((ROOT / "specviz" / "engine").rglob("*.py"))
    found = [hit for path in engine for hit in long_functions(path, ROOT, ENGINE_LONGEST)]
    assert not found, "split these by what they do:\n" + "\n".join(found)


def test_the_length_check_counts_a_long_function(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(80))
    (tmp_path / "long.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}")
    assert long_functions(tmp_path / "long.py", tmp_path) == ["long.py:5 long (81 lines)"]


SWITCHES = ("set_exact", "exact_for")  # models/exact.py's switches of exact mode


def exact_switched_at(path: Path, root: Path) -> list[str]:
    """file:line of each name of exact mode's switches (imported, called or passed on) in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    where = path.relative_to(root).as_posix()
    names = [(n.lineno, n.id) for n in ast.walk(tree) if isinstance(n, ast.Name)]
    names += [(n.lineno, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names]
    return [f"{where}:{line}: {name}" for line, name in names if name in SWITCHES]


def test_exact_mode_is_switched_only_through_the_pair():
    """One door: a run's target goes into exact mode through its Pair (choose_exact, without_exact), which asks the
    runtime whose mode it is, so what the mode came to is the pair's line; only the mode's own module and that
    runtime touch its switches."""
    own = {ROOT / "specviz" / "runtimes" / "transformers_runtime.py", *(ROOT / "specviz" / "models").rglob("*.py")}
    found = [hit for path in scanned(ROOT) if path not in own for hit in exact_switched_at(path, ROOT)]
    assert not found, "exact mode switched outside the pair's runtime:\n" + "\n".join(found)


def test_the_exact_mode_check_finds_a_switch(tmp_path):
    (tmp_path / "bench.py").write_text("from specviz.models.exact import set_exact\nset_exact(m, True)\n")
    assert exact_switched_at(tmp_path / "bench.py", tmp_path) == ["bench.py:2: set_exact", "bench.py:1: set_exact"]


def modules(root: Path) -> list[Path]:
    return sorted((root / "specviz").rglob("*.py"))


def shared_file_names(root: Path) -> list[str]:
    """Each file name (`__init__.py` aside) that more than one module of specviz/ has, with where they are: a name in
    a traceback or a search should say which module it is."""
    where: dict[str, list[str]] = {}
    for path in modules(root):
        if path.name != "__init__.py":
            where.setdefault(path.name, []).append(path.relative_to(root).as_posix())
    return [f"{name}: {', '.join(paths)}" for name, paths in sorted(where.items()) if len(paths) > 1]


def test_no_two_modules_share_a_file_name():
    found = shared_file_names(ROOT)
    assert not found, "rename one of each (the name should say which it is):\n" + "\n".join(found)


def test_the_file_name_check_finds_a_shared_name(tmp_path):
    for rel in (
        "specviz/__init__.py",
        "specviz/a/__init__.py",
        "specviz/a/view.py",
        "specviz/b/view.py",
        "specviz/c.py",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert shared_file_names(tmp_path) == ["view.py: specviz/a/view.py, specviz/b/view.py"]


MOST_AT_THE_TOP = 8  # modules directly in specviz/, __init__.py and __main__.py aside


def top_modules(root: Path) -> list[str]:
    """The modules directly in specviz/ (the types everything stands on), `__init__.py` and `__main__.py` aside."""
    return sorted(p.name for p in (root / "specviz").glob("*.py") if p.name not in ("__init__.py", "__main__.py"))


def test_the_top_of_the_package_holds_at_most_eight_modules():
    found = top_modules(ROOT)
    assert len(found) <= MOST_AT_THE_TOP, f"{len(found)} modules at the top of specviz/; move a service down: {found}"


def test_the_top_count_leaves_the_package_files_and_subpackages_out(tmp_path):
    for rel in ("__init__.py", "__main__.py", "events.py", "settings.py", "engine/loop.py"):
        (tmp_path / "specviz" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "specviz" / rel).write_text("")
    assert top_modules(tmp_path) == ["events.py", "settings.py"]


LONGEST_MODULE = 400  # lines


def long_modules(root: Path, longest: int = LONGEST_MODULE) -> list[str]:
    """file (length) of every module of specviz/ over `longest` lines."""
    lengths = {p.relative_to(root).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in modules(root)}
    return [f"{where} ({n} lines)" for where, n in lengths.items() if n > longest]


def test_no_module_is_longer_than_400_lines():
    found = long_modules(ROOT)
    assert not found, "split these by what they do:\n" + "\n".join(found)


def test_the_module_length_check_counts_a_long_module(tmp_path):
    (tmp_path / "specviz").mkdir()
    (tmp_path / "specviz" / "long.py").write_text("x = 1\n" * 401)
    (tmp_path / "specviz" / "short.py").write_text("x = 1\n" * 400)
    assert long_modules(tmp_path) == ["specviz/long.py (401 lines)"]


def script_summary(path: Path) -> str:
    """A script's one line: its docstring's first line, or a shell script's first comment."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return (ast.get_docstring(ast.parse(text)) or "").split("\n", 1)[0]
    comments = [line[1:].strip() for line in text.splitlines()[1:] if line.startswith("#")]
    return comments[0] if comments else ""


def unlisted_scripts(root: Path) -> list[str]:
    """Each script with no one line of its own, or not listed in scripts/README.md with it; and each script the README
    lists that is gone."""
    folder = root / "scripts"
    listed = dict(re.findall(r"^\| `([^`]+)` \| (.+?) \|$", (folder / "README.md").read_text(encoding="utf-8"), re.M))
    scripts = {p.name: p for p in folder.iterdir() if p.is_file() and p.name != "README.md"}
    problems = [f"{name}: no one line saying what it is for" for name, p in scripts.items() if not script_summary(p)]
    problems += [
        f"{name}: not listed with its one line" for name, p in scripts.items() if listed.get(name) != script_summary(p)
    ]
    return sorted(problems + [f"{name}: listed but gone" for name in listed if name not in scripts])


def test_scripts_readme_lists_every_script_with_its_one_line():
    found = unlisted_scripts(ROOT)
    assert not found, "scripts/README.md and the scripts disagree:\n" + "\n".join(found)


def test_the_scripts_check_finds_a_missing_line_and_a_gone_script(tmp_path):
    folder = tmp_path / "scripts"
    folder.mkdir()
    (folder / "kept.py").write_text('"""Kept: run by CI."""\n')
    (folder / "bare.py").write_text("x = 1\n")
    (folder / "tool.sh").write_text("#!/bin/sh\n# A tool: run by hand.\n")
    (folder / "README.md").write_text(
        "| `kept.py` | Kept: run by CI. |\n| `tool.sh` | A tool: run by hand. |\n| `old.py` | Old. |\n"
    )
    assert unlisted_scripts(tmp_path) == [
        "bare.py: no one line saying what it is for",
        "bare.py: not listed with its one line",
        "old.py: listed but gone",
    ]


def lane_readers(root: Path) -> list[str]:
    """file:line function of every call that splits a string at "@" (split, partition and their right-hand twins)."""
    found = []
    for path in sorted((root / "specviz").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for call in (n for n in ast.walk(func) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
                at = [a for a in call.args if isinstance(a, ast.Constant) and a.value == "@"]
                if call.func.attr in ("split", "rsplit", "partition", "rpartition") and at:
                    found.append(f"{path.relative_to(root).as_posix()}:{call.lineno} {func.name}")
    return found


def test_a_lanes_at_sign_is_read_in_one_function():
    """NAME@G, NAME@aG and NAME@table are read by settings.parse_lane alone: the Grand Prix, the sweep, traffic, the
    simulator and the serving writers take what it returns."""
    assert [hit.split(" ")[1] for hit in lane_readers(ROOT)] == ["parse_lane"], lane_readers(ROOT)


def test_the_lane_check_finds_a_second_reader(tmp_path):
    (tmp_path / "specviz").mkdir()
    (tmp_path / "specviz" / "mine.py").write_text('def drafter(lane):\n    return lane.split("@")[0]\n')
    assert lane_readers(tmp_path) == ["specviz/mine.py:2 drafter"]


def stray_views(root: Path) -> list[str]:
    """file:line Class of every class named *View that lives neither in views/ nor in a view module beside its
    experiment (view.py, *_view.py)."""
    found = []
    for path in sorted((root / "specviz").rglob("*.py")):
        if path.parent.name == "views" or path.stem == "view" or path.stem.endswith("_view"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name.endswith("View"):
                found.append(f"{path.relative_to(root).as_posix()}:{node.lineno} {node.name}")
    return found


def test_every_view_lives_in_views_or_in_a_view_module_beside_its_experiment():
    """A screen's view (pure Python, what it shows) is in views/ when it is a run on one prompt, and in its
    experiment's view.py or *_view.py when it is a workload's, a sweep's or traffic's."""
    assert not stray_views(ROOT), stray_views(ROOT)


def test_the_view_check_finds_a_view_elsewhere(tmp_path):
    (tmp_path / "specviz" / "traffic").mkdir(parents=True)
    (tmp_path / "specviz" / "traffic" / "runner.py").write_text("class QueueView:\n    pass\n")
    (tmp_path / "specviz" / "traffic" / "traffic_view.py").write_text("class TrafficView:\n    pass\n")
    assert stray_views(tmp_path) == ["specviz/traffic/runner.py:1 QueueView"]


def test_no_view_module_brings_torch_in(new_process):
    """Every view module, read in a fresh interpreter: none imports torch, so the screens stay torch-free."""
    views = [p for p in (ROOT / "specviz").rglob("*.py") if p.parent.name == "views" or p.stem.endswith("view")]
    names = [".".join(p.relative_to(ROOT).with_suffix("").parts) for p in sorted(views) if p.stem != "__init__"]
    code = f"import sys, {', '.join(names)}; print('torch' in sys.modules)"
    assert new_process("-c", code, cwd=ROOT, check=True).stdout.strip() == "False"


RUNTIME_CONSTANTS = {"LLAMA_CPP", "TRANSFORMERS", "RUNTIMES"}  # names the runtimes once had outside their modules


def runtime_told_apart(path: Path, root: Path, names: set[str]) -> list[str]:
    """file:line of each comparison that tells a runtime apart by its name: a runtime's name compared with something
    that holds a runtime, a runtime's name searched for in a text, or one of the old constants compared at all."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    where = path.relative_to(root).as_posix()
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        named = [s for s in sides if isinstance(s, ast.Constant) and s.value in names]
        constants = [s for s in sides if isinstance(s, (ast.Name, ast.Attribute)) and ast.unparse(s).split(".")[-1]
                     in RUNTIME_CONSTANTS]  # fmt: skip
        searched = node.left in named and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
        holds = any("runtime" in ast.unparse(s).lower() for s in sides if s not in named)
        if constants or searched or (named and holds):
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def outside_the_runtimes(root: Path) -> list[Path]:
    """Every module of the package but the runtimes' own, and the app."""
    own = root / "specviz" / "runtimes"
    return sorted([*(p for p in (root / "specviz").rglob("*.py") if not p.is_relative_to(own)), root / "app.py"])


def test_no_runtime_is_told_apart_by_its_name_outside_its_own_module():
    """What a runtime gives is read from its declaration (runtimes/runtime.Gives), never from which runtime it is."""
    from specviz.runtimes.runtime_registry import names

    found = [hit for path in outside_the_runtimes(ROOT) for hit in runtime_told_apart(path, ROOT, set(names()))]
    assert not found, "ask the runtime what it gives instead:\n" + "\n".join(found)


def test_the_runtime_name_check_finds_a_runtime_told_apart(tmp_path):
    (tmp_path / "m.py").write_text(
        'if pair.target.runtime == "llama.cpp":\n    pass\n'
        'advice = A if "llama.cpp" in exact else B\n'
        "other = x if runtime != LLAMA_CPP else y\n"
        'fine = row.library == "transformers"\n'
    )
    found = runtime_told_apart(tmp_path / "m.py", tmp_path, {"llama.cpp", "transformers"})
    assert [hit.split(":")[1] for hit in found] == ["1", "3", "4"]


def pairs_made_at(path: Path, root: Path) -> list[str]:
    """file:line of each call that constructs a Pair in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    where = path.relative_to(root).as_posix()
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    return [f"{where}:{c.lineno}" for c in calls if ast.unparse(c.func).split(".")[-1] == "Pair"]


def test_a_pair_is_constructed_in_one_module():
    """runtimes/pair.py opens every pair (open_pair, load_pair): a caller asks for one there, never builds its own."""
    own = ROOT / "specviz" / "runtimes" / "pair.py"
    found = [hit for path in outside_the_runtimes(ROOT) + [*(ROOT / "specviz" / "runtimes").rglob("*.py")]
             if path != own for hit in pairs_made_at(path, ROOT)]  # fmt: skip
    assert not found, "ask runtimes/pair.open_pair for the pair:\n" + "\n".join(found)
    assert len(pairs_made_at(own, ROOT)) == 1


def test_the_pair_check_finds_a_pair_built_elsewhere(tmp_path):
    (tmp_path / "m.py").write_text(
        "pair = Pair(target, draft)\nother = runs.Pair(t)\npreset = PairPreset('a', 'b', 'c')\n"
    )
    assert pairs_made_at(tmp_path / "m.py", tmp_path) == ["m.py:1", "m.py:2"]
