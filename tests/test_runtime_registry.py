"""The runtime registry: a new runtime is one module in specviz/runtimes/, and the command line, the app's Runtime
choice, the auto choice, a race on several runtimes and the production block all find it; the app's shelf keeps the
pair it loaded on each runtime, so switching away and back loads nothing."""

import json
import time

import pytest
from test_registry import CLI_RUNS, copy_with_toy, in_copy

from specviz.app.shelf import ModelShelf, PairPreset

# A third runtime, in pure PyTorch: the transformers model recomputed whole at every forward, with no cache at all;
# trees and a drafter's branches are each row's own forward over the rows it sees.
TOY_RUNTIME = '''"""A toy runtime: a transformers model recomputed whole at every forward, with no cache."""

import time
from pathlib import Path

import torch

from ..errors import RuntimeUnsupported
from ..models.loading import LoadedModel, read_model
from .choice import plan_from
from .runtime import Gives, Loading, Runtime
from .transformers_runtime import TransformersModel


class Recomputed:
    keep_hidden = False
    last_hidden = None

    def __init__(self, model):
        self.model = model
        self.device = model.device
        self.text = []  # the committed tokens, token i at position i
        self.rows = []  # (token, position) of each row fed after it this step

    @property
    def length(self):
        return len(self.text) + len(self.rows)

    def _forward(self, ids, positions):
        with torch.inference_mode():
            return self.model(input_ids=torch.tensor([ids]), position_ids=torch.tensor([positions])).logits[0]

    def _entry(self, column):
        return (self.text[column], column) if column < len(self.text) else self.rows[column - len(self.text)]

    def _row(self, token, position, sees):
        seen = [self._entry(c) for c in sees] + [(token, position)]
        self.rows.append((token, position))
        return self._forward([t for t, _ in seen], [p for _, p in seen])[-1]

    def read_prompt(self, prompt):
        self.text += list(prompt[:-1])

    def extend(self, ids, last_only=False):
        new = [int(t) for t in ids.reshape(-1)]
        self.text += new
        logits = self._forward(self.text, list(range(len(self.text))))[-len(new):]
        return logits[-1:] if last_only else logits

    def truncate(self, length):
        self.rows = self.rows[: max(0, length - len(self.text))]
        self.text = self.text[:length]

    def extend_tree(self, root, tree):
        if tree.is_chain:
            return self.extend(torch.tensor([root, *tree.tokens]))
        out = [self.extend(torch.tensor([root]))[0]]
        base = len(self.text)
        for node, (token, depth) in enumerate(zip(tree.tokens, tree.depths)):
            above = [base + a for a in tree.shape.path_to(node)[:-1]]
            out.append(self._row(token, base - 1 + depth, [*range(base), *above]))
        return torch.stack(out)

    def extend_branches(self, ids, positions, shared, ancestors):
        order = lambda c: self._entry(c)[1]  # noqa: E731
        return torch.stack(
            [self._row(t, p, [*range(shared), *sorted(a, key=order)]) for t, p, a in zip(ids, positions, ancestors)]
        )

    def keep(self, committed, nodes):
        kept = [self.rows[n][0] for n in nodes]
        self.rows = []
        self.text = self.text[:committed] + kept


class ToyModel(TransformersModel):
    @property
    def runtime(self):
        return RUNTIME

    def open_lm(self, capacity, keep_hidden=False):
        if keep_hidden:
            raise RuntimeUnsupported("the toy keeps no hidden states")
        return Recomputed(self.model)

    def open_batch(self, capacity=0):
        return LoadedModel.open_batch(self, capacity)

    def try_fast_path(self):
        return ""


def toy_model(name):
    model, tokenizer, device = read_model(name, "float32", "cpu")
    return ToyModel(name=name, model=model, tokenizer=tokenizer, device=device, precision="float32")


class ToyRuntime(Runtime):
    name = "toy"
    summary = "a transformers model recomputed whole at every forward"
    gives = Gives()
    order = 90
    as_shipped = "float32"
    no_exact = "it recomputes the whole text at every forward"

    def problem(self, ask, where):
        folders = all(Path(n).is_dir() for n in (ask.target, ask.draft) if n)
        return "" if folders else "the toy reads model folders only"

    def plan(self, ask, where, report):
        model = read_model(ask.target, "float32", "cpu")[0]
        curve = {}
        for k in (1, 2, 4, 8):
            began = time.perf_counter()
            with torch.inference_mode():
                model(input_ids=torch.zeros(1, 16 + k, dtype=torch.long))
            curve[k] = time.perf_counter() - began
        return plan_from(self.name, "float32", curve, curve[1] if ask.draft else 0.0)

    def prepare(self, ask, where, plan, report):
        sizes = [(n, 0) for n in (ask.target, ask.draft) if n]
        return Loading(sizes, lambda: toy_model(ask.target), lambda target: toy_model(ask.draft))


RUNTIME = ToyRuntime()
'''

APP_RUNTIMES = """
import json, app
demo = app.build(app.parse_args(['--no-preload', '--device', 'cpu']))
radio = next(c for c in demo.config['components'] if c['props'].get('elem_id') == 'sv-runtime')
print(json.dumps({'choices': radio['props']['choices'], 'info': radio['props']['info']}))
"""


@pytest.fixture(scope="module")
def with_toy_runtime(tmp_path_factory):
    """A copy of the project with one new file, specviz/runtimes/toy.py, and nothing else changed."""
    return copy_with_toy(tmp_path_factory, TOY_RUNTIME, "runtimes")


def runs_in_copy(new_process, root, runs: list[list[str]], env: dict) -> list[dict]:
    """Each command line through `python -m specviz`'s main, in one fresh process of the copy."""
    done = in_copy(new_process, root, "-c", CLI_RUNS, json.dumps(runs), env_extra=env)
    assert done.returncode == 0, done.stderr[-3000:]
    ran = json.loads(done.stdout.strip().splitlines()[-1])
    for one in ran:
        assert one["code"] == 0, one["stderr"][-3000:]
    return ran


@pytest.mark.budget(90, "a copy of the package with one runtime added, several commands in a new process")
def test_a_new_runtime_module_reaches_generate_the_auto_choice_a_race_and_the_production_block(
    new_process, with_toy_runtime, pair_folders, tmp_path
):
    target, draft = map(str, pair_folders)
    base = ["generate", "--target", target, "--prompt", "w5 w5 w5 w9 w5 w5", "--no-chat", "--max-new-tokens", "12"]
    base += ["--device", "cpu", "--json"]
    race = ["race", "--target", target, "--draft", draft, "--prompt", "w5 w5 w5 w9 w5 w5", "--no-chat"]
    race += ["--max-new-tokens", "12", "--device", "cpu", "--json", "--drafters", "ngram,draft@3"]
    helped, toy, toy_ngram, theirs, auto, raced = runs_in_copy(
        new_process,
        with_toy_runtime,
        [
            ["generate", "--help"],
            [*base, "--runtime", "toy"],
            [*base, "--runtime", "toy", "--drafter", "ngram", "--gamma", "3"],
            [*base, "--runtime", "transformers", "--dtype", "float32"],
            [*base, "--runtime", "auto"],
            [*race, "--runtimes", "transformers,toy"],
        ],
        {"SPECVIZ_CACHE": str(tmp_path)},  # auto measures the transformers costs of the tiny shapes here, once
    )
    said = " ".join(helped["stdout"].split())
    assert "--runtime {auto,transformers,llama.cpp,toy}" in said
    assert "toy: a transformers model recomputed whole" in said
    plain = json.loads(toy["stdout"])
    assert plain["runtime"]["runtime"] == "toy" and not plain["exact"]
    assert plain["token_ids"] == json.loads(theirs["stdout"])["token_ids"]  # the same model on another runtime
    drafted = json.loads(toy_ngram["stdout"])
    assert drafted["token_ids"] == plain["token_ids"] and any(step["proposed"] for step in drafted["steps"])
    assert "no equivalent" in drafted["production"]["ran_on"] and "toy" in drafted["production"]["ran_on"]
    assert {"transformers", "toy"} <= set(json.loads(auto["stdout"])["runtime"]["plans"])
    lanes = {lane["name"]: lane for lane in json.loads(raced["stdout"])["lanes"]}
    assert {"plain · toy", "ngram · toy", "draft@3 · toy"} <= set(lanes)
    for name in ("ngram · toy", "draft@3 · toy", "ngram", "draft@3"):
        assert lanes[name]["identical"] is True and lanes[name]["metrics"]["new_tokens"] == 12, name
    assert lanes["plain · toy"]["tokens"] == lanes["plain"]["tokens"] == plain["token_ids"]


@pytest.mark.budget(45, "a copy of the package with one runtime added, the app built in a new process")
def test_a_new_runtime_module_reaches_the_apps_runtime_choice(new_process, with_toy_runtime):
    shown = in_copy(new_process, with_toy_runtime, "-c", APP_RUNTIMES)
    assert shown.returncode == 0, shown.stderr[-2000:]
    found = json.loads(shown.stdout.strip().splitlines()[-1])
    assert [c[0] for c in found["choices"]][-1] == "toy" and "auto" in [c[0] for c in found["choices"]]
    assert "toy: a transformers model recomputed whole" in found["info"]


def test_switching_the_runtime_away_and_back_loads_nothing(pair_folders_with_gguf):
    """The shelf keeps the pair it loaded on each runtime: the second switch back is the pair already held."""
    target, draft = map(str, pair_folders_with_gguf)
    shelf = ModelShelf([PairPreset("tiny", target, draft)], "cpu")

    def switch(runtime: str) -> tuple[float, list[str]]:
        began = time.perf_counter()
        lines = list(shelf.load("tiny", "float32", runtime=runtime))
        return time.perf_counter() - began, lines

    first, lines = switch("transformers")
    held = shelf.current()
    assert lines[-1].startswith("loaded tiny") and held.runs_on.name == "transformers"
    away, lines = switch("llama.cpp")
    assert lines[-1].startswith("loaded tiny") and shelf.current().runs_on.name == "llama.cpp"
    back, lines = switch("transformers")
    assert lines == [] and shelf.current() is held
    assert back < first / 10, (first, away, back)
    again, lines = switch("llama.cpp")
    assert lines == [] and again < away / 10
    assert shelf.beside_pair("transformers") is held  # a race on every runtime runs on what is held
