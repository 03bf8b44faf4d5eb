"""A workload on a local Ray cluster (two actors on this machine, the tiny pair): the merged view and report equal the
one-machine run's, an actor killed mid-prompt loses nothing and its prompt is marked retried, and without Ray
`--cluster` answers in one line."""

import builtins
import csv
import io
import json
import sys
from functools import partial

import pytest
from test_cli import assert_one_line_error, run_cli

from specviz.cli import build_parser
from specviz.cli.workload import workload_job
from specviz.drafters.registry import kinds
from specviz.events import PLAIN
from specviz.render.report import report_csv
from specviz.workload.cluster import fill, on_cluster
from specviz.workload.ray_shards import connect
from specviz.workload.run import run_workload

DRAFT_MODEL = next(k.name for k in kinds(menu_only=True) if k.needs_draft is True)
LOOKUPS = [k.name for k in kinds(menu_only=True) if k.listing.lookup and not k.needs_draft][:2]
DRAFTERS = [DRAFT_MODEL, *LOOKUPS]
PROMPTS = 12


def command(pair_folders, prompts, out, *extra):
    target, draft = pair_folders
    return [
        "workload",
        "--target",
        str(target),
        "--draft",
        str(draft),
        "--prompts",
        str(prompts),
        "--out",
        str(out),
        "--drafters",
        ",".join(DRAFTERS),
        "--gamma",
        "3",
        "--max-new-tokens",
        "10",
        "--dtype",
        "bfloat16",  # exact mode: each greedy token bit for bit whatever was drafted, on whichever actor
        "--draft-dtype",
        "float32",
        "--device",
        "cpu",
        *extra,
    ]


@pytest.fixture(scope="module")
def workload_prompts(tmp_path_factory):
    path = tmp_path_factory.mktemp("cluster") / "prompts.txt"
    lines = (" ".join(f"w{(i * 7 + j * (i % 5 + 1)) % 40}" for j in range(3 + i % 9)) for i in range(PROMPTS))
    path.write_text("\n".join(lines))
    return path


@pytest.fixture(scope="module")
def here(ray_cluster, pair_folders, workload_prompts, tmp_path_factory):
    """The PROMPTS prompts × three drafters decoded on this machine, one after another: the reference."""
    args = build_parser().parse_args(
        command(pair_folders, workload_prompts, tmp_path_factory.mktemp("here") / "r.html")
    )
    prepare, _ = workload_job(args)
    view, run_side = prepare(actors=2)  # two devices' bounds, as on the cluster
    for _ in run_workload(view, run_side, every_s=3600):
        pass
    return view


def tokens(view):
    return {key: cell.tokens for key, cell in view.cells.items()}


def rows(text):
    """The report's CSV by drafter, without the columns that depend on the clock or the machine."""
    keep = ("drafter", "prompts", "tokens", "identical", "note")
    return {r["drafter"]: {k: r[k] for k in keep} for r in csv.DictReader(io.StringIO(text))}


def test_a_workload_on_two_actors_merges_into_the_one_machine_report(
    ray_cluster, pair_folders, workload_prompts, here, tmp_path
):
    args = build_parser().parse_args(command(pair_folders, workload_prompts, tmp_path / "r.html", "--cluster", "local"))
    prepare = partial(workload_job(args)[0], actors=2)
    view, _ = prepare()
    for _ in fill(view, on_cluster(view, prepare, connect("local", 2)), every_s=0.2):
        pass
    assert view.finished and not view.stopped and len(view.cells) == PROMPTS * (1 + len(DRAFTERS))
    assert tokens(view) == tokens(here)
    assert rows(report_csv(view)) == rows(report_csv(here))
    assert rows(report_csv(view))[DRAFT_MODEL]["identical"] == str(PROMPTS)
    shares = view.placements()
    assert len(shares) == 2 and sorted(i for prompts, _ in shares.values() for i in prompts) == list(range(PROMPTS))
    assert view.retried() == []


@pytest.mark.budget(120, "Ray restarts the killed actor and reloads its model: 61 s on a slow 2-core day")
def test_an_actor_killed_mid_prompt_loses_nothing_and_its_prompt_is_marked_retried(
    ray_cluster, pair_folders, workload_prompts, here, tmp_path
):
    args = build_parser().parse_args(command(pair_folders, workload_prompts, tmp_path / "r.html", "--cluster", "local"))
    prepare = partial(workload_job(args)[0], actors=2)
    view, _ = prepare()
    run, killed = on_cluster(view, prepare, connect("local", 2)), []
    for _ in fill(view, run, every_s=0.2):
        done = sum(c.done for c in view.cells.values())
        # a task the driver still holds may have just finished: kill again until one dies mid-prompt
        running = [i for i, _ in run.pending.values() if i is not None]
        if done >= 8 and running and not view.retried() and not run.retried and len(killed) < 4:
            prompt, actor = next((i, a) for i, a in run.pending.values() if i is not None)
            killed.append(prompt)
            ray_cluster.kill(run.actors[actor], no_restart=False)  # Ray restarts it; its prompt runs again
    assert view.retried() and set(view.retried()) <= set(killed), (killed, view.retried())
    killed = view.retried()[0]
    assert tokens(view) == tokens(here)  # every prompt once, nothing lost, nothing counted twice
    assert all(view.cells[killed, side].retried for side in view.sides)
    assert rows(report_csv(view)) == rows(report_csv(here))
    listed = {r["drafter"]: r["retried"] for r in csv.DictReader(io.StringIO(report_csv(view)))}
    assert str(killed + 1) in listed[PLAIN].split()


def test_the_command_line_runs_on_the_cluster_with_one_progress_line_per_run(
    ray_cluster, capsys, pair_folders, workload_prompts, here, tmp_path
):
    out = tmp_path / "r.html"
    code, printed, err = run_cli(
        capsys, *command(pair_folders, workload_prompts, out, "--cluster", "local", "--actors", "2")
    )
    assert code == 0, err
    assert err.count("prompt ") == PROMPTS * (1 + len(DRAFTERS)) and "[actor " in err
    table = out.with_suffix(".csv").read_text(encoding="utf-8-sig")
    assert rows(table) == rows(report_csv(here))
    page = out.read_text(encoding="utf-8")
    assert "actor 1 on" in page and "retried" in page
    assert "Take it to production" in page and "prompt_lookup_num_tokens=" in page  # each drafter elsewhere


def test_without_ray_the_cluster_flag_answers_in_one_line(
    capsys, pair_folders, workload_prompts, tmp_path, monkeypatch
):
    real = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    code, _, err = run_cli(capsys, *command(pair_folders, workload_prompts, tmp_path / "r.html", "--cluster", "local"))
    assert_one_line_error(code, err, "--cluster", 'pip install "specviz[cluster]"')
    assert not (tmp_path / "r.html").exists()


def test_the_apps_your_prompts_runs_on_the_cluster_given_at_launch(ray_cluster, pair_folders):
    """app.py --cluster ADDRESS: the Your prompts tab's workload goes to the cluster's actors and comes back as the
    one-device run's table."""
    from specviz.app.backend import Backend
    from specviz.app.shelf import ModelShelf, PairPreset

    target, draft = pair_folders
    presets = [PairPreset("tiny", str(target), str(draft))]
    values = {"pair": "tiny", "drafter": "none", "dtype": "bfloat16", "prompt": "w1", "gamma": 3, "max_new_tokens": 8}
    prompts = ["w1 w2 w3 w1 w2", "w4 w5 w4 w5 w6", "w7 w8", "w9 w1 w9 w1"]
    views = {}
    for where in ("", "local"):
        backend = Backend(ModelShelf(presets, "cpu"), cluster=where)
        *_, views[where] = backend.workload(values, prompts, DRAFTERS, True)
    here, there = views[""], views["local"]
    assert there.finished and tokens(there) == tokens(here)
    assert rows(report_csv(there)) == rows(report_csv(here))
    assert len(there.placements()) >= 1 and not here.placements()


def bench_command(pair_folders, out, *extra):
    target, draft = pair_folders
    cells = "--kinds repeat_sql,code,repeat_fields --prompts-per-kind 2 --max-new-tokens 10 --gammas 3 --temperatures 0"
    runs = "--repeats 1 --dtype bfloat16 --draft-dtype float32 --no-transformers"  # exact mode, as above
    models = ["--target", str(target), "--draft", str(draft), "--methods", f"{DRAFT_MODEL},ngram,suffix"]
    return ["bench", *models, *cells.split(), *runs.split(), "--out", str(out), *extra]


def test_the_bench_runs_each_prompt_kind_whole_on_one_actor(ray_cluster, capsys, pair_folders, tmp_path):
    """Suffix decoding drafts from its kind's earlier prompts: run whole and in order on one actor, each kind's rows
    are the one-machine run's (the same cells, tokens identical to plain, the same acceptance at a fixed γ for the
    drafters whose drafts follow from the tokens), and every row says which actor timed it."""
    found = {}
    for where, extra in (("here", ()), ("there", ("--cluster", "local", "--actors", "2"))):
        code, printed, err = run_cli(capsys, *bench_command(pair_folders, tmp_path / where, *extra))
        assert code == 0, err
        found[where] = json.loads((tmp_path / where / "bench.json").read_text()), printed, err
    (here, _, _), (there, report, err) = found["here"], found["there"]

    def cells(bench):
        keep = ("kind", "run_index", "prompt", "temperature", "method", "gamma", "library", "same_as_plain")
        return sorted(tuple(str(r[k]) for k in keep) for r in bench["rows"])

    def acceptance(bench):
        return {
            (r["kind"], r["run_index"], r["method"], r["gamma"]): (r["alpha"], r["tau"])
            for r in bench["rows"]
            if r["method"] in ("ngram", "suffix") and r["gamma"] != "adaptive"  # adaptive γ follows the clock
        }

    assert cells(there) == cells(here)
    assert all(r["same_as_plain"] for r in there["rows"] if r["method"] != PLAIN)
    assert acceptance(there) == acceptance(here)
    taus = acceptance(there)  # the second prompt of a kind drafted from the first's run, on the same actor
    assert any(taus[kind, 1, "suffix", 3][1] > taus[kind, 0, "suffix", 3][1] for kind in ("repeat_sql", "code"))
    actors = {r["ran_on"] for r in there["rows"]}
    assert len(actors) == 2 and all(a.startswith("actor ") for a in actors)
    assert all(r["ran_on"] is None for r in here["rows"])
    for kind in ("repeat_sql", "code", "repeat_fields"):
        assert len({r["ran_on"] for r in there["rows"] if r["kind"] == kind}) == 1  # one kind, one actor
        assert kind in there["meta"]["cluster"]
    assert "a Ray cluster of 2 actors" in there["meta"]["cluster"] and "a Ray cluster" in report
    assert err.count("] [repeat_sql #") >= 2 and "[actor 1] " in err


def test_without_ray_the_benchs_cluster_flag_answers_in_one_line(capsys, pair_folders, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    code, _, err = run_cli(capsys, *bench_command(pair_folders, tmp_path / "b", "--cluster", "local"))
    assert_one_line_error(code, err, "--cluster", 'pip install "specviz[cluster]"')
    assert not (tmp_path / "b").exists()
