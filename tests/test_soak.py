"""A soak on 127.0.0.1: 120 short runs through gradio_client from 4 sessions at once, with varied settings and
drafters, some stopped and some refused. Every run must be answered, the server's resident memory must stay flat
after a warm-up, and no thread may be left behind. The figures are printed (pytest -n 0 -s shows them)."""

import os
import random
import re
import threading
import time
from pathlib import Path

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError
from test_app import STATUS, SUMMARY, run

RUNS, SESSIONS, WARM_UP = 120, 4, 30
DRAFTERS = ["draft", "ngram", "history", "suffix", "medusa"]


def resident_mib(pid: int) -> float:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]) / 1024


def threads(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


@pytest.fixture(scope="module")
def soak_server(launch_app, pair_folders, pair_heads):
    proc, url = launch_app(pair_folders, pair_heads)
    yield proc, url, f"{pair_folders[0]} ← {pair_folders[1]}"
    proc.terminate()
    proc.wait(timeout=30)


def one_run(client, pair, rng: random.Random) -> str:
    """A run with random settings; a few are stopped early, a few carry a bad value. What came back, in a word."""
    settings = dict(
        drafter=rng.choice(DRAFTERS),
        gamma=rng.randint(1, 6),
        max_new=rng.randint(4, 24),
        temperature=rng.choice([0, 0, 0.7, 1.0]),
        top_k=rng.choice([0, 5]),
        seed=rng.randint(0, 99),
        prompt=rng.choice(["w1 w2 w3", "w5 w5 w5 w9 w5 w5", "w7 w3 w7 w3 w7"]),
    )
    if settings["drafter"] == "medusa" and settings["temperature"]:
        settings["acceptance"] = rng.choice(["lossless", "typical"])
    trouble = rng.random()
    if trouble < 0.1:
        settings["top_k"] = -1  # refused by specviz, in its status line
    elif trouble < 0.15:
        settings["gamma"] = "abc"  # refused before specviz sees it
    stop = 0.15 <= trouble < 0.3
    if stop:
        settings["max_new"] = 400
    try:
        job = run(client, pair, **settings)
        if stop:
            deadline = time.time() + 60
            while len(job.outputs()) < 2 and not job.done() and time.time() < deadline:
                time.sleep(0.02)
            client.predict(api_name="/stop")
        final = job.result(timeout=120)
    except AppError:
        return "refused"
    if "sv-status-error" in final[STATUS]:
        assert settings["top_k"] == -1, final[STATUS]  # the only bad value that reaches specviz
        return "error"
    summary = final[SUMMARY]
    assert summary["finished"], final[STATUS]
    return "stopped" if summary["stopped"] else "finished"


@pytest.mark.budget(180, "120 races from four sessions against one server, memory sampled throughout")
def test_120_runs_from_4_sessions_are_all_answered_with_flat_memory_and_no_stray_thread(soak_server):
    proc, url, pair = soak_server
    answers, failures, lock = [], [], threading.Lock()
    marks = {}

    def session(index: int) -> None:
        client, rng = Client(url, verbose=False), random.Random(index)
        for _ in range(RUNS // SESSIONS):
            try:
                answer = one_run(client, pair, rng)
            except Exception as exc:  # noqa: BLE001 (any failure is the finding)
                answer = f"failed: {type(exc).__name__}: {exc}"
                with lock:
                    failures.append(answer)
            with lock:
                answers.append(answer)
                if len(answers) == WARM_UP:
                    marks["warm"] = (resident_mib(proc.pid), threads(proc.pid))

    began = time.time()
    workers = [threading.Thread(target=session, args=(i,)) for i in range(SESSIONS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=900)
    time.sleep(1.0)  # let the last streams close
    rss, count = resident_mib(proc.pid), threads(proc.pid)
    warm_rss, warm_threads = marks["warm"]
    tally = {a: answers.count(a) for a in sorted(set(answers))}
    print(
        f"\nsoak: {len(answers)} runs in {time.time() - began:.0f} s from {SESSIONS} sessions: {tally}; resident "
        f"memory {warm_rss:.0f} MiB after {WARM_UP} runs, {rss:.0f} MiB after {len(answers)}; threads {warm_threads} "
        f"then {count}"
    )
    assert not failures, failures[:3]
    assert len(answers) == RUNS and proc.poll() is None
    assert {"finished", "stopped", "error", "refused"} <= set(tally)  # every path was taken
    assert rss - warm_rss < max(40.0, 0.05 * warm_rss)  # flat: no growth per run
    assert count <= warm_threads + 4  # no thread left behind per run


def left_lines(proc) -> dict[str, tuple[int, int]]:
    """session id's start -> (visitors, tokens) from each 'a visitor left' line the server has logged."""
    proc.log.seek(0)
    pattern = r"a visitor left \(session (\w+)\); (\d+) visitors' earlier runs hold (\d+) tokens"
    return {m[1]: (int(m[2]), int(m[3])) for m in re.finditer(pattern, proc.log.read())}


def wait_for_leave(proc, session: str) -> tuple[int, int]:
    """What the server said held when this session left; a visitor not seen leaving in a minute fails the test."""
    deadline = time.time() + 60
    while (said := left_lines(proc).get(session[:8])) is None and time.time() < deadline:
        time.sleep(0.2)
    assert said is not None, f"the server never saw session {session[:8]} leave: {left_lines(proc)}"
    return said


SOAK_BATCHES, SOAK_VISITORS, SOAK_RUNS, SOAK_TOKENS = 3, 2, 2, 300


@pytest.mark.budget(120, "three batches of visitors, each with two 300-token runs, memory measured after each")
def test_visitors_with_long_runs_who_leave_leave_nothing_behind(launch_app, pair_folders, pair_heads):
    """Batches of visitors, each with long suffix runs (all remembered for drafting); when they leave, the server says
    it holds nothing of theirs, and its resident memory after the last batch is what it was after the first."""
    proc, url = launch_app(pair_folders, pair_heads, env={**os.environ, "GRADIO_HEARTBEAT_INTERVAL": "0.5"})
    pair, rng, resident, began = f"{pair_folders[0]} ← {pair_folders[1]}", random.Random(5), [], time.time()
    try:
        for _ in range(SOAK_BATCHES):
            # A gradio_client Client is a session as a browser tab is one: it holds the session's heartbeat stream
            # open, and close() ends it, so the server's unload handler runs for the session. Each leave is matched
            # by its session id, so launch_app's own probe (a visitor too, which leaves whenever it is collected)
            # is never mistaken for one of these.
            visits = [Client(url, verbose=False) for _ in range(SOAK_VISITORS)]
            for visit in visits:
                assert visit.session_hash[:8] not in left_lines(proc), "a visitor left before it was done"
                for _ in range(SOAK_RUNS):
                    prompt = " ".join(f"w{rng.randrange(60)}" for _ in range(12))
                    final = run(visit, pair, prompt=prompt, drafter="suffix", max_new=SOAK_TOKENS).result(300)
                    assert final[SUMMARY]["finished"], final[STATUS]
            for i, visit in enumerate(visits):
                assert all(v.session_hash[:8] not in left_lines(proc) for v in visits[i:]), "a visitor left early"
                visit.close()
                visitors, tokens = wait_for_leave(proc, visit.session_hash)
                assert visitors == SOAK_VISITORS - i - 1  # the others' runs are still held until they leave too
                assert (tokens > 0) == (visitors > 0), (visitors, tokens)
            resident.append(resident_mib(proc.pid))
        held = SOAK_VISITORS * SOAK_RUNS * SOAK_TOKENS
        print(
            f"\nsessions soak: {SOAK_BATCHES} batches of {SOAK_VISITORS} visitors, each {SOAK_RUNS} runs of "
            f"{SOAK_TOKENS} tokens (a batch holds over {held} tokens before it leaves) in {time.time() - began:.0f} s; "
            f"resident memory after each batch left: {', '.join(f'{r:.0f}' for r in resident)} MiB"
        )
        assert resident[-1] - resident[0] < max(30.0, 0.05 * resident[0])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
