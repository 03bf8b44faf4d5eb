"""The drafter registry: a new drafter is one module, and the CLI, the app and the benchmark all offer it; the
layers import each other without cycles."""

import ast
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from specviz.drafters.contract import Recipe
from specviz.drafters.listing import Listing
from specviz.drafters.options import Options, option, shared_option
from specviz.drafters.registry import _check_option_names, build_drafter, kind, kinds, option_owners
from specviz.errors import InvalidRequest
from specviz.settings import Settings

ROOT = Path(__file__).resolve().parent.parent

TOY = '''"""A toy drafter: proposes the last token again, shifted by an offset (0: a repeat)."""

from dataclasses import dataclass

from .contract import BaseDrafter, Proposal, Recipe
from .listing import Listing
from .options import Options, option


class RepeatDrafter(BaseDrafter):
    def __init__(self, offset, vocab):
        self.offset, self.vocab = offset, vocab

    def propose(self, tokens, gamma):
        return Proposal((((tokens[-1] + self.offset) % self.vocab,) * gamma,))


class ToyOptions(Options):
    toy_offset: int = option(0, "toy offset", "added to the last token id", low=0, high=3)


KIND = Recipe("toy", ToyOptions, lambda o, ctx: RepeatDrafter(o.toy_offset, ctx.target.vocab_size),
              Listing("toy: repeat the last token", "proposes the last token again", order=50))
'''

APP_MENU = """
import json, app
demo = app.build(app.parse_args(['--no-preload']))
menu = next(c for c in demo.config['components'] if c['props'].get('elem_id') == 'sv-drafter')
labels = [c['props'].get('label') for c in demo.config['components']]
params = [p['parameter_name'] for p in demo.get_api_info()['named_endpoints']['/run']['parameters']]
print(json.dumps({'menu': menu['props']['choices'], 'labels': labels, 'params': params}))
"""


# The toy again, declaring what it is in one serving engine: a vLLM method of its own, and nothing elsewhere.
TOY_IN_VLLM = TOY.replace(
    "from .contract import", "from ..serving.declaration import Serving, VllmMethod\nfrom .contract import"
).replace("order=50))", 'order=50),\n              serving=Serving(vllm=VllmMethod("toy_repeat")))')


def copy_with_toy(tmp_path_factory, source: str, where: str = "drafters") -> Path:
    """A copy of the project with one new file, specviz/<where>/toy.py (`source`), and nothing else changed."""
    root = tmp_path_factory.mktemp("with-toy")
    shutil.copytree(ROOT / "specviz", root / "specviz", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "app.py", root / "app.py")
    (root / "assets").symlink_to(ROOT / "assets")
    (root / "specviz" / where / "toy.py").write_text(source)
    return root


@pytest.fixture(scope="module")
def with_toy(tmp_path_factory):
    """A copy of the project with one new file, specviz/drafters/toy.py, and nothing else changed."""
    return copy_with_toy(tmp_path_factory, TOY)


def in_copy(run, root, *args, timeout=300, env_extra=None):
    """`python *args` through `run` (the new_process fixture), in the copy and importing from it (`env_extra`: more
    of its environment)."""
    return run(*args, cwd=root, env={**os.environ, "PYTHONPATH": str(root), **(env_extra or {})}, timeout=timeout)


# Several command lines through `python -m specviz`'s own main in one fresh process (each new process spends seconds
# importing torch): each one's exit code, stdout and stderr, as JSON.
CLI_RUNS = """
import contextlib, io, json, sys
from specviz.cli import main
done = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit:
            code = exit.code
    done.append({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
print(json.dumps(done))
"""


def test_a_new_drafter_module_reaches_the_cli(new_process, with_toy, model_folder):
    base = ["generate", "--target", str(model_folder), "--prompt", "w5 w5 w5 w5", "--no-chat"]
    base += ["--max-new-tokens", "16", "--dtype", "float32", "--device", "cpu", "--json"]
    runs = [
        ["generate", "--help"],
        base,
        [*base, "--drafter", "toy", "--toy-offset", "1", "--gamma", "3"],
        [*base, "--drafter", "toy", "--toy-offset", "9"],
        [*base, "--drafter", "ngram", "--toy-offset", "1"],
    ]
    done = in_copy(new_process, with_toy, "-c", CLI_RUNS, json.dumps(runs))
    assert done.returncode == 0, done.stderr[-2000:]
    helped, plain, toy, refused, other = json.loads(done.stdout.strip().splitlines()[-1])
    assert helped["code"] == 0 and "toy" in helped["stdout"] and "--toy-offset" in helped["stdout"]
    assert toy["code"] == 0, toy["stderr"]
    ran = json.loads(toy["stdout"])
    assert ran["drafter"] == "toy" and ran["token_ids"] == json.loads(plain["stdout"])["token_ids"]
    assert any(step["proposed"] for step in ran["steps"])
    assert refused["code"] == 2
    assert refused["stderr"].strip().splitlines() == ["error: toy offset must be an integer in 0..3, got 9"]
    assert other["code"] == 2 and "--toy-offset is only used by --drafter toy, not ngram" in other["stderr"]


def handoff_in_copy(new_process, root: Path, model_folder) -> dict:
    """The toy's handoff as `generate --json` writes it, run in a fresh process of the copy: engine -> its setting."""
    args = ["generate", "--target", str(model_folder), "--prompt", "w5 w5 w5", "--no-chat", "--max-new-tokens", "4"]
    args += ["--dtype", "float32", "--device", "cpu", "--json", "--drafter", "toy", "--gamma", "3"]
    done = in_copy(new_process, root, "-c", CLI_RUNS, json.dumps([args]))
    assert done.returncode == 0, done.stderr[-2000:]
    [ran] = json.loads(done.stdout.strip().splitlines()[-1])
    assert ran["code"] == 0, ran["stderr"]
    return {e["engine"]: e for e in json.loads(ran["stdout"])["production"]["engines"]}


@pytest.mark.budget(45, "a copy of the package with one module added, run in a new process")
def test_a_new_drafter_declaring_a_vllm_method_is_handed_to_vllm_as_that_method(
    new_process, tmp_path_factory, model_folder
):
    engines = handoff_in_copy(new_process, copy_with_toy(tmp_path_factory, TOY_IN_VLLM), model_folder)
    command = engines["vLLM"]["text"]
    assert command.startswith(f"vllm serve {model_folder} --speculative-config")
    assert json.loads(command.split("'")[1]) == {"method": "toy_repeat", "num_speculative_tokens": 3}
    assert engines["vLLM"]["nearest"] == ""  # vLLM runs it as specviz ran it (a chain, a fixed γ)
    for engine in ("transformers", "SGLang"):  # declared nowhere else: no setting, and it says so
        assert engines[engine]["text"] == "" and "no equivalent" in engines[engine]["nearest"]


@pytest.mark.budget(45, "a copy of the package with one module added, run in a new process")
def test_a_new_drafter_declaring_nothing_has_no_equivalent_in_any_engine(new_process, with_toy, model_folder):
    engines = handoff_in_copy(new_process, with_toy, model_folder)
    assert list(engines) == ["transformers", "vLLM", "SGLang", "llama.cpp"]
    for engine, setting in engines.items():
        assert setting["text"] == "", engine  # nothing borrowed from another kind
        assert "no equivalent" in setting["nearest"] and "toy" in setting["nearest"], setting
        assert "heads" not in setting["nearest"], setting


@pytest.mark.budget(45, "a copy of the package with one module added, run in a new process")
def test_a_new_drafter_module_reaches_the_app_menu_and_its_api(new_process, with_toy):
    shown = in_copy(new_process, with_toy, "-c", APP_MENU)
    assert shown.returncode == 0, shown.stderr[-2000:]
    found = json.loads(shown.stdout.strip().splitlines()[-1])
    assert ["toy: repeat the last token", "toy"] in found["menu"]
    assert "toy offset" in found["labels"]  # its option panel
    assert found["params"][:16] == [
        "pair",
        "drafter",
        "dtype",
        "prompt",
        "gamma",
        "max_new",
        "temperature",
        "top_k",
        "top_p",
        "seed",
        "ngram_min",
        "candidates",
        "choice",
        "medusa_tree",
        "acceptance",
        "adaptive",
    ]  # the published order stays; the new option comes after it
    assert found["params"][16:] == [
        "draft_dtype",
        "draft_tree",
        "draft_nodes",
        "draft_window",
        "hybrid_window",
        "hybrid_model",
        "hybrid_branch",
        "suffix_factor",
        "suffix_nodes",
        "suffix_runs",
        "eagle_tree",
        "eagle_nodes",
        "dflash_tree",
        "dflash_nodes",
        "toy_offset",
        "exact",
        "runtime",
    ]


@pytest.mark.budget(45, "a copy of the package with one module added, run in a new process")
def test_a_new_drafter_module_reaches_the_benchmark(new_process, with_toy, pair_folders, tmp_path):
    target, draft = pair_folders
    out = tmp_path / "bench"
    ran = in_copy(
        new_process,
        with_toy,
        "-m",
        "specviz",
        "bench",
        "--target",
        str(target),
        "--draft",
        str(draft),
        "--methods",
        "toy",
        "--kinds",
        "code",
        "--prompts-per-kind",
        "1",
        "--max-new-tokens",
        "8",
        "--gammas",
        "2",
        "--temperatures",
        "0",
        "--repeats",
        "1",
        "--no-transformers",
        "--dtype",
        "float32",
        "--out",
        str(out),
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    rows = json.loads((out / "bench.json").read_text())["rows"]
    assert {(r["method"], r["gamma"]) for r in rows if r["method"] == "toy"} == {("toy", 2), ("toy", "adaptive")}
    assert all(r["same_as_plain"] for r in rows if r["method"] == "toy")
    listed = in_copy(new_process, with_toy, "-m", "specviz", "bench", "--target", str(target), "--methods", "magic")
    assert (
        listed.returncode == 2 and "draft,hybrid,ngram,history,suffix,medusa,eagle,dflash,toy,oracle" in listed.stderr
    )


def test_the_project_itself_lists_its_drafters_in_menu_order():
    menu = ["draft", "hybrid", "ngram", "history", "suffix", "medusa", "eagle", "dflash"]
    assert [k.name for k in kinds()] == [*menu, "oracle"]
    assert [k.name for k in kinds(menu_only=True)] == menu
    with pytest.raises(InvalidRequest, match="unknown drafter 'magic'; choose one of: none, draft, hybrid, ngram"):
        kind("magic")
    assert build_drafter("none", Settings(), None, None) is None


def test_options_check_themselves_and_take_values_from_a_browser():

    class Sample(Options):
        size: int = option(3, "sample size", "how many", low=1, high=8)
        mode: str = option("a", "sample mode", "which", choices=("a", "b"))

    assert Sample.parse({"size": 5.0, "mode": "b", "unrelated": 1}) == Sample(5, "b")  # others' options ignored
    assert Sample.parse({"size": None}) == Sample()
    for bad, words in (
        ({"size": 9}, "sample size must be an integer in 1..8, got 9"),
        ({"size": 2.5}, "sample size must be a whole number, got 2.5"),
        ({"size": "many"}, "sample size must be a number, got 'many'"),
        ({"mode": "c"}, "sample mode must be a or b, got 'c'"),
    ):
        with pytest.raises(InvalidRequest, match=words):
            Sample.parse(bad)


def _imports(path: Path, module: str) -> set[str]:
    """Modules of specviz that `module` (at `path`) imports, at the top or inside functions, with the packages whose
    __init__ such an import runs first (those not already above the importer)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            base = (base + "." + node.module if node.module else base) if node.level else node.module
            names |= {base} | {f"{base}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    found = set()
    for name in names:
        if not name.startswith("specviz"):
            continue
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            found.add(".".join(parts[:i]))
    ancestors = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
    return found - ancestors - {module}


# The package's layers, bottom first: a module imports only from layers below its own (within its own part, anything).
LAYERS = (
    ("specviz", "errors", "reading"),
    ("settings", "events"),
    ("trace", "serving"),
    ("analysis", "models", "paths"),
    ("engine", "record"),
    ("drafters", "runtimes"),
    ("runs", "training"),
    ("views",),
    ("workload", "bench", "traffic"),
    ("render",),
    ("app",),
    ("cli",),
    ("__main__",),
)


def _modules() -> dict[str, Path]:
    files = {}
    for path in (ROOT / "specviz").rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        files[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = path
    return files


def test_no_module_imports_from_a_layer_above_its_own():
    level = {part: i for i, parts in enumerate(LAYERS) for part in parts}
    files = _modules()

    def part(module: str) -> str:
        return module.split(".")[1] if "." in module else module

    assert set(level) == {part(m) for m in files}, "a part of the package is in no layer"
    upward = [
        f"{m} imports {n}"
        for m, p in files.items()
        for n in _imports(p, m)
        if n in files and part(n) != part(m) and level[part(n)] >= level[part(m)]
    ]
    assert not upward, upward


def test_no_import_cycles():
    files = _modules()
    graph = {m: {n for n in _imports(p, m) if n in files} for m, p in files.items()}
    assert graph["specviz.drafters.draft_model"] >= {"specviz.engine", "specviz.drafters.contract"}  # edges are seen
    state, cycles = {}, []

    def visit(m, trail):
        state[m] = "open"
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                cycles.append(trail[trail.index(n) :] + [n])
            elif n not in state:
                visit(n, trail + [n])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycles, cycles


class _Heads(Options):
    heads: object = option("", "heads", "where the heads are", app=False)
    width: int = option(2, "width", "how wide", low=1, high=4)


class _SharesHeads(Options):
    heads: object = shared_option(_Heads, "heads")


class _SharesWidth(Options):
    width: int = shared_option(_Heads, "width")


class _OwnHeads(Options):
    heads: object = option("", "heads", "another meaning", app=False)


def test_two_kinds_share_an_option_only_as_one_option_the_screen_does_not_show():
    def made(name, options):
        return Recipe(name, options, lambda o, ctx: None, Listing(name, name))

    _check_option_names([made("a", _Heads), made("b", _SharesHeads)])  # one option, one flag, for both
    for other in (_SharesWidth, _OwnHeads):  # a shared control on two panels; the same name meaning two things
        with pytest.raises(RuntimeError, match="both declare option"):
            _check_option_names([made("a", _Heads), made("b", other)])
    shared = {spec.name: [k.name for k in takers] for takers, spec in option_owners()}
    assert shared["eagle"] == ["hybrid", "eagle"] and shared["hybrid_model"] == ["hybrid"]


def test_what_the_kinds_declare_for_their_callers_holds_together():
    from specviz.drafters.registry import best_for, default_kind, pair_model_options, published_options

    assert default_kind() == kinds(menu_only=True)[0] and default_kind().needs_draft  # the app warms its draft up
    families = [b.family for k in kinds() for b in k.listing.best_for]
    prompts = json.loads((ROOT / "assets" / "prompts.json").read_text())
    assert len(families) == len(set(families)) and set(families) <= set(prompts)  # one best drafter per family
    for family in families:
        drafter, best = best_for(family)
        assert drafter.listing.menu and Settings(gamma=best.gamma).gamma == best.gamma
    assert best_for("no such family") is None
    # the bench races a drafter against transformers' method that does the same, which it knows how to run
    assert {k.listing.counterpart for k in kinds() if k.listing.counterpart} == {
        "transformers assisted",
        "transformers prompt lookup",
    }
    assert all(not k.listing.menu for k in kinds() if k.listing.sets_alpha)  # a measuring tool, not offered to users
    for spec in pair_model_options():  # a model's location: brought by the pair, never typed on the screen
        assert not spec.app and spec.cli
    brought = {*dict(published_options("lmsys/vicuna-7b-v1.3")), *dict(published_options("Qwen/Qwen3-4B"))}
    assert brought == {s.name for s in pair_model_options()} and published_options("no/such-model") == ()
    assert dict(published_options("Qwen/Qwen3-4B")) == {
        "eagle": "AngelSlim/Qwen3-4B_eagle3",
        "dflash": "z-lab/Qwen3-4B-DFlash-b16",
    }


def test_the_layout_in_the_design_notes_names_every_file_and_no_file_that_is_gone():
    """docs/design.md's layout is written by hand: it must name every package of specviz, every module of it and
    every script, and every file it names must still exist (in the package, scripts/, tests/ or at the top)."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    packages = {p.parent.relative_to(ROOT / "specviz").as_posix() for p in (ROOT / "specviz").rglob("__init__.py")}
    named = set(re.findall(r"([a-z_]+)/", block))
    assert {p.split("/")[-1] for p in packages if p != "."} <= named, "a package the layout does not name"
    files = {p.name for p in ROOT.rglob("*.py") if ".git" not in p.parts} | {"Spacefile"}
    listed = set(re.findall(r"(?<![\w.-])([a-z0-9_-]+\.(?:py|sh))\b", block))
    gone = sorted(f for f in listed if f.endswith(".py") and f not in files)
    assert not gone, f"the layout names files that do not exist: {gone}"
    modules = {p.name for p in (ROOT / "specviz").rglob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    scripts = {p.name for p in (ROOT / "scripts").iterdir() if p.suffix in (".py", ".sh")}
    missing = sorted((modules | scripts) - listed)
    assert not missing, f"the layout leaves out files that exist: {missing}"


def test_looking_kinds_up_does_not_scan_the_package_again(monkeypatch):
    """The package's modules do not change while a program runs: it is scanned once, not on every lookup (the app
    and the CLI look a kind up many times per run)."""
    import pkgutil

    first = kinds()
    scans, real = [], pkgutil.iter_modules
    monkeypatch.setattr(pkgutil, "iter_modules", lambda *a, **k: scans.append(a) or real(*a, **k))
    for _ in range(50):
        assert kind(first[0].name) is first[0] and kinds() == first
    assert scans == []
