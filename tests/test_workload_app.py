"""The "Your prompts" tab through the API (/workload) against `python app.py` serving a tiny pair: the table fills as
runs finish, greedy outputs stay plain decoding's, the report and its CSV come back, a bad file is one message and
the app keeps serving, and Stop keeps the runs that finished."""

import csv
import time
from pathlib import Path

import pytest
from gradio_client import Client, handle_file

from specviz.drafters.registry import kinds

STATUS, PROGRESS, TABLE, REPORT, CSV = range(5)
EVIL = '<img src=x onerror="window.__pwned=1">'
OFFERED = [k.name for k in kinds(menu_only=True)]
DRAFT_MODEL = next(k.name for k in kinds(menu_only=True) if k.needs_draft is True)
LOOKUP = next(k.name for k in kinds(menu_only=True) if k.listing.lookup and not k.needs_draft)


@pytest.fixture()
def client(app_server):
    return Client(app_server[0], verbose=False)


def workload(client, pair, prompts="", upload=None, drafters=(DRAFT_MODEL, LOOKUP), max_new=16, best=False):
    return client.submit(
        pair=pair,
        drafter=OFFERED[0],
        dtype="float32",
        prompt="w1",
        gamma=3,
        max_new=max_new,
        temperature=0,
        adaptive=False,
        prompts_text=prompts,
        prompts_file=None if upload is None else handle_file(str(upload)),
        drafters=list(drafters),
        draft_length="each drafter's best" if best else "the γ in the settings",
        api_name="/workload",
    )


def test_pasted_prompts_fill_the_table_and_the_report_comes_back(client, app_server):
    prompts = f"w1 w2 w3 w1 w2 w3\nw4 w5 {EVIL}\nw7 w8 w9 w7 w8 w9"
    job = workload(client, app_server[1], prompts)
    final = job.result(timeout=300)
    assert len(job.outputs()) >= 4  # it streamed: loading, then run by run
    assert "done; 9 of 9 runs" in final[PROGRESS] and "sv-status-done" in final[STATUS]
    assert EVIL not in final[TABLE] and "&lt;img src=x" in final[TABLE]
    assert final[TABLE].count("3/3") >= 4  # each drafter: every output identical, and every prompt counted
    report = Path(final[REPORT])
    assert report.suffix == ".html" and EVIL not in report.read_text(encoding="utf-8")
    rows = {r["drafter"]: r for r in csv.DictReader(Path(final[CSV]).open(encoding="utf-8-sig"))}
    assert rows[DRAFT_MODEL]["identical"] == "3" and rows[LOOKUP]["prompts"] == "3"


def test_an_upload_wins_over_pasted_text_and_a_bad_one_is_one_message(client, app_server, tmp_path):
    good = tmp_path / "mine.jsonl"
    good.write_text('{"prompt": "w1 w2 w1 w2"}\n{"turns": ["w3 w4", "later"]}\n', encoding="utf-8")
    final = workload(client, app_server[1], "w9 w9\nw8 w8\nw7 w7", upload=good, drafters=[LOOKUP]).result(120)
    assert "done; 4 of 4 runs" in final[PROGRESS]
    bad = tmp_path / "questions.csv"
    bad.write_text("id,question\n1,why\n", encoding="utf-8")
    status = workload(client, app_server[1], upload=bad).result(timeout=60)[STATUS]
    assert "error: questions.csv has no &quot;prompt&quot; column" in status and status.count("error:") == 1
    status = workload(client, app_server[1], "  \n").result(timeout=60)[STATUS]
    assert "error: no prompts" in status
    again = workload(client, app_server[1], "w1 w2", drafters=[LOOKUP]).result(timeout=60)
    assert "done; 2 of 2 runs" in again[PROGRESS]  # the app kept serving


def test_stop_keeps_the_runs_that_finished(client, app_server):
    prompts = "\n".join(f"w{i} w{i + 1} w{i + 2}" for i in range(8))
    job = workload(client, app_server[1], prompts, drafters=[LOOKUP], max_new=400)
    deadline = time.time() + 120
    while not any("prompt 3 of 8" in (out[PROGRESS] or "") for out in job.outputs()):
        assert time.time() < deadline and not job.done()
        time.sleep(0.1)
    client.predict(api_name="/stop")
    final = job.result(timeout=60)
    assert "stopped: the runs that finished are kept" in final[PROGRESS]
    assert "2/8" in final[TABLE] or "3/8" in final[TABLE]  # the prompts both sides finished are counted
    assert Path(final[REPORT]).read_text(encoding="utf-8").count("stopped") >= 1
