"""The app as a ZeroGPU Space would run it, emulated on a CPU: `spaces` is tests/fake_zero_gpu (each decorated call in
a forked worker, everything in and out pickled by multiprocessing, a closed generator stopping the worker at its next
item, as the real package does); the race, the sweep, the Grand Prix and Stop go through the app's API. Also: a CPU
Space (the package importable, no GPU, no ZeroGPU) keeps the CPU pair."""

import json
import os
import sys
import time
from pathlib import Path

import psutil
import pytest
from gradio_client import Client
from test_app import SUMMARY, run
from test_traffic_app import call_traffic

FAKE = str(Path(__file__).resolve().parent / "fake_zero_gpu")


def zero_env(log: Path, zero: bool = True) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("SPACES_ZERO_GPU", "PYTHONPATH")}
    env.update(PYTHONPATH=FAKE, FAKE_ZERO_GPU_LOG=str(log), SYSTEM="spaces", SPACE_ID="someone/specviz")
    if zero:
        env["SPACES_ZERO_GPU"] = "true"
    return env


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture(scope="module")
def zero_app(launch_app, pair_folders, pair_heads, tmp_path_factory):
    log = tmp_path_factory.mktemp("zero") / "calls.jsonl"
    proc, url = launch_app(pair_folders, pair_heads, extra=["--device", "cpu", "--dtype", "float32"], env=zero_env(log))
    yield url, f"{pair_folders[0]} ← {pair_folders[1]}", log, proc
    proc.terminate()
    proc.wait(timeout=30)


def workers(proc) -> list:
    return [
        c
        for c in psutil.Process(proc.pid).children(recursive=True)
        if c.is_running() and c.status() != psutil.STATUS_ZOMBIE
    ]


def test_the_pair_is_loaded_on_the_main_thread_before_the_server_answers(zero_app):
    proc = zero_app[3]
    proc.log.seek(0)
    said = proc.log.read()
    assert "specviz: device cpu" in said and f"loaded {zero_app[1]} (float32, cpu)" in said


def test_a_race_runs_in_a_worker_and_asks_for_a_duration_from_its_request(zero_app):
    url, pair, log, proc = zero_app
    before = len(calls(log))
    job = run(Client(url, verbose=False), pair, max_new=300)
    summary = job.result(timeout=300)[SUMMARY]
    assert summary["finished"] and not summary["stopped"] and summary["identical"] is True
    assert len(summary["plain_tokens"]) == 300 and summary["plain_tokens"] == summary["speculative_tokens"]
    assert len(job.outputs()) >= 3  # streamed step by step from the worker
    made = calls(log)[before:]
    assert [c["task"] for c in made] == ["race"]
    assert made[0]["duration"] == 10 + int(2 * 300 * 0.06) and made[0]["pid"] == proc.pid  # asked by the server


def test_the_default_race_asks_for_60_seconds_or_less():
    from specviz.app.device_calls import decode_seconds, race_seconds
    from specviz.app.request import Request
    from specviz.settings import Settings

    default = Request("pair", "hello", Settings(max_new_tokens=256))  # the GPU's default budget
    assert race_seconds(default) <= 60 and decode_seconds(default) <= 60
    assert race_seconds(Request("pair", "hello", Settings(max_new_tokens=1024))) > 60


def test_a_sweep_is_one_call_per_run(zero_app):
    url, pair, log, _ = zero_app
    before = len(calls(log))
    job = Client(url, verbose=False).submit(
        pair,
        "draft",
        "float32",
        "w1 w2 w3",
        4,
        20,
        0,
        0,
        1,
        0,
        3,
        4,
        "recent",
        "sparse",
        "lossless",
        False,
        api_name="/sweep",
    )
    status, chart = job.result(timeout=300)
    assert "γ sweep: done" in status and chart["type"] == "plotly"
    made = calls(log)[before:]
    assert [c["task"] for c in made] == ["decode"] * 9  # plain, then γ = 1..8
    assert all(c["duration"] == 10 + int(20 * 0.06) for c in made)


def test_traffic_is_one_call_that_asks_for_its_arrivals_and_tokens(zero_app):
    """Traffic at every rate, plain and each lane, in one worker call; every request still equals its prompt alone."""
    url, pair, log, _ = zero_app
    before = len(calls(log))
    answer = call_traffic(url, pair=pair, dtype="float32", concurrency_names="ngram", rates="40", requests=3, max_new=8)
    assert "traffic: done" in answer and ">yes<" in answer and ">NO<" not in answer
    made = calls(log)[before:]
    assert [c["task"] for c in made] == ["under_load"] and 10 <= made[0]["duration"] <= 300


def test_a_grand_prix_is_one_call_for_every_lane(zero_app):
    """Compare all races plain decoding and every lane in one worker call, which asks for every lane's tokens."""
    url, pair, log, _ = zero_app
    from specviz.drafters.registry import kinds

    before = len(calls(log))
    job = Client(url, verbose=False).submit(
        pair=pair,
        drafter="draft",
        dtype="float32",
        prompt="w1 w2 w3 w1 w2",
        gamma=4,
        max_new=16,
        api_name="/compare",
    )
    outputs = job.result(timeout=600)
    status, table, summary = outputs[0], outputs[1], outputs[-1]
    assert "Grand Prix done" in status, status
    runnable = [k.name for k in kinds(menu_only=True) if k.name not in ("eagle", "dflash")]  # it brings neither
    made = calls(log)[before:]
    assert [c["task"] for c in made] == ["grand_prix"]  # one call, every lane in it
    assert made[0]["duration"] == 10 + int((1 + len(runnable)) * 16 * 0.06)
    for name in runnable:
        assert name in table
    lanes = {lane["name"]: lane for lane in summary["lanes"]}
    assert [n for n, lane in lanes.items() if lane["note"] == ""] == ["plain", *runnable]
    assert all(lanes[n]["identical"] is True and lanes[n]["tokens"] == lanes["plain"]["tokens"] for n in runnable)
    assert len(lanes["plain"]["tokens"]) == 16
    assert lanes["eagle"]["note"].startswith("not available") and lanes["dflash"]["note"].startswith("not available")


def test_a_workload_is_one_call_per_prompt_and_side_with_plain_shared(zero_app):
    url, pair, log, _ = zero_app
    from specviz.drafters.registry import kinds

    lookups = [k for k in kinds(menu_only=True) if k.listing.lookup and not k.needs_draft][:2]
    before = len(calls(log))
    outputs = (
        Client(url, verbose=False)
        .submit(
            pair=pair,
            dtype="float32",
            max_new=12,
            prompts_text="w1 w2 w1 w2\nw3 w4 w3 w4\nw5 w6 w5",
            prompts_file=None,
            drafters=[k.name for k in lookups],
            draft_length="the γ in the settings",
            api_name="/workload",
        )
        .result(timeout=600)
    )
    assert "done; 9 of 9 runs" in outputs[1], outputs[1]
    assert [c["task"] for c in calls(log)[before:]] == ["decode"] * 9  # 3 prompts × (plain once + 2 drafters)
    assert outputs[2].count("3/3") >= 4  # every greedy output identical, compared in the server


def test_stop_closes_the_worker_within_a_step_and_the_next_run_goes_on(zero_app):
    url, pair, log, proc = zero_app
    client = Client(url, verbose=False)
    job = run(client, pair, max_new=4000)
    deadline = time.time() + 120
    while len(job.outputs()) < 3 and not job.done():
        assert time.time() < deadline
        time.sleep(0.05)
    assert workers(proc), "the race runs in a forked worker"
    asked = time.time()
    client.predict(api_name="/stop")
    summary = job.result(timeout=60)[SUMMARY]
    assert time.time() - asked < 10
    assert summary["stopped"] and summary["finished"] and len(summary["plain_tokens"]) < 4000
    assert summary["identical"] is True  # compared as far as both got, in the server
    gone = time.time() + 10
    while workers(proc) and time.time() < gone:
        time.sleep(0.05)
    assert not workers(proc), "the worker ended once its generator was closed"
    again = run(client, pair, max_new=8).result(timeout=120)[SUMMARY]
    assert again["finished"] and not again["stopped"] and len(again["plain_tokens"]) == 8


def test_another_pair_is_refused_in_one_line(zero_app):
    url, pair, _, _ = zero_app
    status = Client(url, verbose=False).predict("Qwen2.5 1.5B ← 0.5B (Hub)", "float32", "same", api_name="/load")
    assert "error: " in status and "on ZeroGPU this Space serves" in status


VISITOR = """
import json, sys
import spaces
from specviz.app.backend import Backend
from specviz.app.device_calls import DeviceCalls, decode_seconds, race_seconds
from specviz.app.shelf import ModelShelf, PairPreset

shelf = ModelShelf([PairPreset("tiny", sys.argv[1], sys.argv[2])], "cpu")
shelf.get("tiny", "float32")
calls = DeviceCalls(shelf)
calls.race = spaces.GPU(duration=race_seconds)(calls.race)
calls.decode = spaces.GPU(duration=decode_seconds)(calls.decode)
backend = Backend(shelf, calls)
ask = dict(pair="tiny", drafter="suffix", dtype="float32", prompt="w1 w2 w3 w4 w5", max_new_tokens=24, gamma=4)
first = list(backend.race(ask, session="alice"))[-1]
kept = [list(r.tokens) for r in backend.memories.of("alice").runs]
again = list(backend.race(ask, session="alice"))[-1]
print(json.dumps({"first": first.spec.tokens, "kept": kept, "again": again.spec.tokens,
                  "origins": [e.origin for e in again.spec.events if e.proposed],
                  "alice": len(backend.memories.of("alice").runs), "bob": len(backend.memories.of("bob").runs)}))
"""


def test_a_visitors_runs_come_back_from_the_worker(pair_folders, tmp_path, new_process):
    """The backend with its device calls wrapped by the fake package: the suffix drafter's memory of the visitor's
    earlier runs is kept by the server, sent into each call, and the new run comes back. In a fresh process, as on a
    Space, whose server forks its workers before it has computed anything (a process that has run torch's CPU
    kernels can hang in a forked child)."""
    env = zero_env(tmp_path / "log")
    env["PYTHONPATH"] = os.pathsep.join([FAKE, str(Path(__file__).resolve().parent.parent)])
    done = new_process("-c", VISITOR, *map(str, pair_folders), env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["kept"][-1][-24:] == seen["first"]  # the run came back from the worker into the server's memory
    assert seen["again"] == seen["first"]
    assert "an earlier run" in seen["origins"]  # the second run drafted from the first, sent into its worker
    assert seen["alice"] == 2 and seen["bob"] == 0
    assert [c["task"] for c in calls(tmp_path / "log")] == ["race", "race"]


def test_a_cpu_space_with_the_package_keeps_the_cpu_pair(tmp_path, new_process):
    """`spaces` importable, no CUDA, no ZeroGPU: the app's device is the CPU, so the offline CPU pair (or the smallest
    Hub pair) comes first, not the 7B GPU pair."""
    root = Path(__file__).resolve().parent.parent
    probe = (
        "import app, json; from specviz.app.shelf import default_pairs; from specviz.models.device import "
        "resolve_device; gpu = resolve_device('auto').type == 'cuda'; "
        "print(json.dumps({'spaces': app.spaces is not None, 'gpu': gpu, "
        "'first': default_pairs(gpu)[0].label}))"
    )
    done = new_process("-c", probe, cwd=root, env=zero_env(tmp_path / "log", zero=False), timeout=120)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["spaces"] and not seen["gpu"]
    assert "Hub, GPU" not in seen["first"] and ("offline, CPU" in seen["first"] or "(Hub)" in seen["first"])


def test_the_fake_package_pickles_like_the_real_one(monkeypatch):
    """What the old app passed (a stop flag's bound method) cannot cross; a closed generator stops its worker."""
    import threading

    monkeypatch.syspath_prepend(FAKE)
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    sys.modules.pop("spaces", None)
    import spaces

    def count(stopped, n):
        yield from range(n)

    counting = spaces.GPU(duration=5)(count)

    def alive():
        return {p.pid for p in psutil.Process().children() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE}

    before = alive()
    with pytest.raises(Exception, match="pickle"):
        next(counting(threading.Event().is_set, 3))
    stream = counting(None, 10**9)
    assert [next(stream) for _ in range(3)] == [0, 1, 2]
    stream.close()  # returns once the worker has read its stop event and ended
    assert alive() <= before
    sys.modules.pop("spaces", None)
