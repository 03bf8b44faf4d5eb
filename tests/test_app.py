"""The app through gradio_client against `python app.py` serving a tiny pair: streams, finishes, stops, refuses."""

import re
import time

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError
from gradio_client.utils import Status

from specviz.app.ui.handlers import StopBoard

STATUS, ECHO, PLAIN, SPEC, ROWS, METRICS, BADGE, CHART, SUMMARY = range(9)


def run(
    client,
    pair,
    prompt="w1 w2 w3",
    gamma=3,
    max_new=40,
    temperature=0,
    top_k=0,
    top_p=1,
    seed=0,
    dtype="float32",
    drafter="draft",
    ngram_min=3,
    candidates=4,
    choice="recent",
    tree="sparse",
    acceptance="lossless",
    adaptive=False,
):
    return client.submit(
        pair,
        drafter,
        dtype,
        prompt,
        gamma,
        max_new,
        temperature,
        top_k,
        top_p,
        seed,
        ngram_min,
        candidates,
        choice,
        tree,
        acceptance,
        adaptive,
        api_name="/run",
    )


@pytest.fixture()
def client(app_server):
    return Client(app_server[0], verbose=False)


@pytest.fixture()
def pair(app_server):
    return app_server[1]


def test_a_run_streams_finishes_and_reports_metrics(client, pair):
    job = run(client, pair, max_new=200)
    final = job.result(timeout=300)
    updates = job.outputs()
    assert len(updates) >= 3 and not updates[0][SUMMARY]["finished"]  # it streamed before it finished
    summary = final[SUMMARY]
    assert summary["finished"] and not summary["stopped"] and summary["identical"] is True
    assert len(summary["plain_tokens"]) == 200 and summary["plain_tokens"] == summary["speculative_tokens"]
    assert summary["speculative"]["target_forwards"] < summary["plain"]["target_forwards"] == 200
    assert summary["plain"]["tokens_per_s"] > 0 and summary["speculative"]["acceptance_rate"] is not None
    assert "sv-status-done" in final[STATUS] and "identical to plain decoding" in final[BADGE]
    assert "speedup" in final[METRICS] and final[ROWS].count('class="sv-row"') == min(
        300, summary["speculative"]["target_forwards"]
    )
    assert final[CHART]["type"] == "plotly"


def test_stop_halts_the_run_and_another_starts_at_once(client, pair):
    job = run(client, pair, max_new=4000)
    deadline = time.time() + 120
    while len(job.outputs()) < 2 and not job.done():
        assert time.time() < deadline
        time.sleep(0.05)
    asked = time.time()
    client.predict(api_name="/stop")
    summary = job.result(timeout=60)[SUMMARY]
    assert time.time() - asked < 10
    assert summary["stopped"] and summary["finished"] and len(summary["plain_tokens"]) < 4000
    again = run(client, pair, max_new=8).result(timeout=60)[SUMMARY]
    assert again["finished"] and not again["stopped"] and len(again["plain_tokens"]) == 8


# /compare's outputs (wiring.compare_outputs): the status, the table, the chart, a text per drafter and plain's, the two
# downloads, the lanes and the summary (the trace is state, kept from clients).
GP_TEXTS = 1 + 8  # plain, draft, hybrid, ngram, history, suffix, medusa, eagle, dflash
GP_STATUS, GP_TABLE = 0, 1
GP_LANES = 3 + GP_TEXTS + 2
GP_SUMMARY = GP_LANES + 1


def grand_prix(client, pair, max_new=300, **values):
    return client.submit(
        pair=pair, drafter="draft", dtype="float32", prompt="w1 w2 w3", max_new=max_new, api_name="/compare", **values
    )


def lane_counts(lanes_html: str) -> dict[str, int]:
    """Tokens written by each lane, from the lanes' progress bars."""
    names = re.findall(r'class="sv-gp-lane [^"]*" data-lane="([^"]+)"', lanes_html)
    counts = [int(n) for n in re.findall(r'role="progressbar" aria-valuenow="(\d+)"', lanes_html)]
    assert len(names) == len(counts), lanes_html[:500]
    return dict(zip(names, counts))


# Tokens each lane of the streamed Grand Prix writes: enough for updates while nine lanes run (the lanes refresh
# every 0.5 s at most, and on a fast CPU the tiny pair writes 120 tokens in nine lanes in about 1.2 s).
LANE_TOKENS = 200


def test_compare_streams_the_lanes_as_they_grow(client, pair):
    from specviz.drafters.registry import kinds

    assert GP_TEXTS == 1 + len(kinds(menu_only=True))
    job = grand_prix(client, pair, max_new=LANE_TOKENS)
    final = job.result(timeout=300)
    assert len(final) == GP_SUMMARY + 1
    seen = [lane_counts(out[GP_LANES]) for out in job.outputs() if isinstance(out[GP_LANES], str)]
    totals = [sum(counts.values()) for counts in seen]
    between = [t for t in totals if 0 < t < 9 * LANE_TOKENS]
    assert between, totals  # the screen showed the lanes part-way, while they ran
    assert totals == sorted(totals), totals  # they only grow
    for before, after in zip(seen, seen[1:]):
        assert all(after[name] >= n for name, n in before.items()), (before, after)
    summary = final[GP_SUMMARY]
    assert summary["kind"] == "grand prix" and summary["finished"] and not summary["stopped"]
    names = ["plain"] + [k.name for k in kinds(menu_only=True)]
    assert [lane["name"] for lane in summary["lanes"]] == names  # this server brings every drafter's models
    plain = summary["lanes"][0]["tokens"]
    assert len(plain) == LANE_TOKENS
    for lane in summary["lanes"]:
        assert lane["note"] == "" and lane["done"] and lane["identical"] is True, lane["name"]
        assert lane["tokens"] == plain and lane["place"] in range(1, len(names) + 1), lane["name"]
    assert sorted(lane["place"] for lane in summary["lanes"]) == list(range(1, len(names) + 1))
    assert lane_counts(final[GP_LANES]) == dict.fromkeys(names, LANE_TOKENS)
    assert "Grand Prix done" in final[GP_STATUS] and all(f">{name}<" in final[GP_TABLE] for name in names)
    assert final[GP_LANES - 2].endswith(".json") and final[GP_LANES - 1].endswith(".html")  # the downloads


def test_compare_takes_the_lanes_by_name_or_only_the_old_arguments(client, pair):
    named = grand_prix(client, pair, max_new=12, lane_names="draft@2, ngram@a6").result(timeout=120)[GP_SUMMARY]
    lanes = named["lanes"]
    assert [(lane["name"], lane["gamma"], lane["adaptive"]) for lane in lanes] == [
        ("plain", 0, False),
        ("draft@2", 2, False),
        ("ngram@a6", 6, True),
    ]
    assert all(lane["identical"] is True and lane["tokens"] == lanes[0]["tokens"] for lane in lanes)
    old = client.submit(
        pair, "draft", "float32", "w1 w2", 3, 6, 0, 0, 1, 0, 3, 4, "recent", "sparse", "lossless", False,
        api_name="/compare",
    )  # fmt: skip
    summary = old.result(timeout=120)[GP_SUMMARY]
    assert summary["finished"] and len(summary["lanes"]) == GP_TEXTS
    bad = grand_prix(client, pair, max_new=6, lane_names="draft,draft").result(timeout=60)
    assert "error: " in bad[GP_STATUS] and "named twice" in bad[GP_STATUS]


def test_stop_halts_a_grand_prix_and_every_lane_keeps_what_it_wrote(client, pair):
    job = grand_prix(client, pair, max_new=4000)
    deadline = time.time() + 120

    def every_lane_started() -> bool:  # from the lanes streamed so far: each has written something
        shown = [out[GP_LANES] for out in job.outputs() if isinstance(out[GP_LANES], str)]
        return bool(shown) and min(lane_counts(shown[-1]).values()) > 0

    while not every_lane_started() and not job.done():
        assert time.time() < deadline
        time.sleep(0.05)
    asked = time.time()
    client.predict(api_name="/stop")
    final = job.result(timeout=60)
    assert time.time() - asked < 10
    summary = final[GP_SUMMARY]
    assert summary["stopped"] and summary["finished"], final[GP_STATUS]
    assert "stopped" in final[GP_STATUS]
    plain = summary["lanes"][0]["tokens"]
    for lane in summary["lanes"]:
        assert 0 < len(lane["tokens"]) < 4000, lane["name"]
        shorter = min(len(plain), len(lane["tokens"]))
        assert lane["tokens"][:shorter] == plain[:shorter] and lane["identical"] is True, lane["name"]
    assert lane_counts(final[GP_LANES]) == {lane["name"]: len(lane["tokens"]) for lane in summary["lanes"]}
    began = time.time()
    again = grand_prix(client, pair, max_new=8, lane_names="draft, ngram").result(timeout=60)[GP_SUMMARY]
    assert time.time() - began < 30
    assert again["finished"] and not again["stopped"]
    assert [len(lane["tokens"]) for lane in again["lanes"]] == [8, 8, 8]


def test_stop_reaches_ones_own_run_while_it_waits_behind_another_visitors(app_server, pair):
    url = app_server[0]
    other, ours = Client(url, verbose=False), Client(url, verbose=False)
    theirs = run(other, pair, max_new=4000)
    deadline = time.time() + 120
    while len(theirs.outputs()) < 2 and not theirs.done():
        assert time.time() < deadline
        time.sleep(0.05)
    mine = run(ours, pair, max_new=300)
    while mine.status().code != Status.IN_QUEUE:  # ours waits for the device
        assert time.time() < deadline and not mine.done()
        time.sleep(0.05)
    ours.predict(api_name="/stop")
    other.predict(api_name="/stop")
    summary = mine.result(timeout=60)[SUMMARY]
    assert summary["stopped"] and len(summary["plain_tokens"]) < 300
    assert theirs.result(timeout=60)[SUMMARY]["stopped"]
    again = run(ours, pair, max_new=8).result(timeout=60)[SUMMARY]  # the stop was used up: the next run goes on
    assert again["finished"] and not again["stopped"] and len(again["plain_tokens"]) == 8


def test_the_stop_board_keeps_a_stop_for_a_waiting_run_and_for_nothing_else():
    board = StopBoard()
    board.arm("a")  # a click on Run: its run waits in the queue
    board.stop("a")
    with board.running("a") as flag:
        assert flag.is_set()
    board.stop("a")  # nothing armed or running, the device idle: nothing of ours can be waiting
    with board.running("a") as flag:
        assert not flag.is_set()
    board.stop("a", device_busy=True)  # an API client's run may wait behind another visitor's
    with board.running("b") as theirs, board.running("a") as flag:
        assert flag.is_set() and not theirs.is_set()
    board.stop("a", device_busy=True)
    board.arm("a")  # a new click after the stop: a new intent
    with board.running("a") as flag:
        assert not flag.is_set()
        board.stop("a")
        assert flag.is_set()


@pytest.mark.parametrize(
    "change, words",
    [
        (dict(prompt="   "), "error: the prompt is empty"),
        (dict(top_k=-1), "error: top-k"),
        (dict(prompt="w1 " * 5000), "error: the prompt is 5000 tokens"),
        (
            dict(seed=2**70),
            f"error: seed must be an integer in 0..4294967295 (2**32 - 1: on a CPU torch keeps only the low 32 "
            f"bits of a seed), got {2**70}",
        ),
        (dict(seed=2**53 + 1), "got 9007199254740993"),  # the seed given, not a float's rounding of it
    ],
)
def test_bad_input_gives_one_message_and_the_app_keeps_serving(client, pair, change, words):
    final = run(client, pair, **change).result(timeout=60)
    assert words in final[STATUS] and "sv-status-error" in final[STATUS] and "Traceback" not in final[STATUS]
    assert run(client, pair, max_new=4).result(timeout=60)[SUMMARY]["finished"]


@pytest.mark.parametrize("change", [dict(gamma=0), dict(max_new=99999), dict(top_p=0), dict(temperature=-1)])
def test_values_no_slider_can_make_are_refused_in_one_line(client, pair, change):
    """Through the API a slider can be sent anything; Gradio checks its range before specviz sees it."""
    with pytest.raises(AppError) as refused:
        run(client, pair, **change).result(timeout=60)
    assert "value" in str(refused.value).lower() and "\n" not in str(refused.value).strip()
    assert run(client, pair, max_new=4).result(timeout=60)[SUMMARY]["finished"]


def run_raw(client, url, **values) -> list:
    """/run over plain HTTP with ASCII JSON, which can carry what gradio_client's UTF-8 encoder refuses (a lone
    surrogate): every parameter at its default unless given; the final outputs."""
    import json

    import httpx

    parameters = client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/run"]["parameters"]
    data = [values.get(p["parameter_name"], p["parameter_default"]) for p in parameters]
    event = httpx.post(
        f"{url}gradio_api/call/run",
        content=json.dumps({"data": data}),
        headers={"content-type": "application/json"},
        timeout=30,
    ).json()["event_id"]
    stream = httpx.get(f"{url}gradio_api/call/run/{event}", timeout=60).text.splitlines()
    done = stream.index("event: complete")
    return json.loads(stream[done + 1].removeprefix("data: "))


def test_a_lone_surrogate_in_the_prompt_gives_one_message(client, app_server, pair):
    final = run_raw(client, app_server[0], pair=pair, prompt="w1 \ud800 w2", dtype="float32")
    assert "error: the prompt is not valid text" in final[STATUS] and "sv-status-error" in final[STATUS]
    assert run(client, pair, max_new=4).result(timeout=60)[SUMMARY]["finished"]


@pytest.mark.parametrize(
    "change, words",
    [
        (dict(gamma="abc"), "γ (draft length) must be a number, got &#x27;abc&#x27;"),
        (dict(temperature=[1]), "Temperature must be a number"),
        (dict(seed="x"), "Seed must be a number"),
        (dict(candidates="<b>"), "must be a number, got &#x27;&lt;b&gt;&#x27;"),
    ],
)
def test_a_value_that_is_no_number_is_refused_naming_its_field(client, pair, change, words):
    with pytest.raises(AppError) as refused:
        run(client, pair, **change).result(timeout=60)
    assert words in str(refused.value) and "\n" not in str(refused.value).strip()
    assert run(client, pair, max_new=4).result(timeout=60)[SUMMARY]["finished"]


def test_an_unknown_pair_is_refused_and_the_app_keeps_serving(client, pair):
    """The pair menu takes names added at run time, so an unknown one is refused by specviz, in one line."""
    final = run(client, "no such pair").result(timeout=60)
    assert "unknown model pair &#x27;no such pair&#x27;" in final[STATUS] and "sv-status-error" in final[STATUS]
    assert "Traceback" not in final[STATUS] and not final[SUMMARY].get("finished")
    assert run(client, pair, max_new=4).result(timeout=60)[SUMMARY]["finished"]


def test_markup_in_the_prompt_is_shown_as_text_everywhere(client, pair):
    evil = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    final = run(client, pair, prompt=evil, max_new=6).result(timeout=60)
    for html in final[:CHART]:
        assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in final[ECHO]
    refused = run(client, pair, prompt=evil, top_k=-2).result(timeout=60)
    assert "<script" not in refused[ECHO] and "<script" not in refused[STATUS] and "error: top-k" in refused[STATUS]


def test_the_gamma_sweep_reports_progress_and_a_chart(client, pair):
    job = client.submit(
        pair,
        "draft",
        "float32",
        "w1 w2 w3",
        4,
        30,
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
    assert "theory: α=" in chart["plot"] and "best measured γ" in chart["plot"]
    assert len(job.outputs()) >= 9  # loading/baseline, then one update per γ


@pytest.mark.parametrize("drafter", ["ngram", "history"])
def test_lookup_drafters_race_and_show_their_trees(client, pair, drafter):
    final = run(
        client, pair, prompt="w5 w5 w5 w9 w5 w5 w5", drafter=drafter, max_new=120, gamma=4, candidates=3
    ).result(timeout=120)
    summary = final[SUMMARY]
    assert summary["finished"] and summary["identical"] is True
    assert summary["speculative"]["target_forwards"] < summary["plain"]["target_forwards"]
    if drafter == "history":
        assert "other candidate" in final[ROWS] and "sv-cand" in final[ROWS]


def test_lookup_options_are_checked(client, pair):
    with pytest.raises(AppError):
        run(client, pair, drafter="history", candidates=0).result(timeout=60)  # below the slider's range


def test_medusa_races_with_its_acceptance_mode_on_screen(client, pair):
    final = run(client, pair, prompt="w5 w5 w5 w9 w5 w5 w5", drafter="medusa", max_new=80, gamma=4, tree="wide").result(
        timeout=120
    )
    summary = final[SUMMARY]
    assert summary["finished"] and summary["identical"] is True and summary["lossy"] is False
    assert summary["speculative"]["target_forwards"] < summary["plain"]["target_forwards"]
    assert "Medusa heads, wide tree" in final[SPEC] and "lossless" in final[SPEC]
    assert "sv-cand" in final[ROWS]  # losing candidates of tree steps, as for history lookup
    typical = run(
        client, pair, prompt="w5 w5 w5 w9", drafter="medusa", max_new=30, temperature=0.8, acceptance="typical"
    ).result(timeout=120)
    assert typical[SUMMARY]["lossy"] is True and "LOSSY" in typical[SPEC] and "sv-mode-lossy" in typical[SPEC]
    assert "lossy by design" in typical[BADGE]
    refused = run(client, pair, drafter="medusa", temperature=0.7, acceptance="greedy").result(timeout=60)
    assert "error: greedy acceptance needs temperature 0" in refused[STATUS]


def test_eagle_races_its_dynamic_tree_through_the_api(client, pair):
    job = client.submit(
        pair,
        "eagle",
        "float32",
        "w5 w5 w5 w9",
        4,
        30,
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
        eagle_tree="dynamic",
        eagle_nodes=8,
        api_name="/run",
    )
    final = job.result(timeout=120)
    summary = final[SUMMARY]
    assert summary["finished"] and summary["identical"] is True and summary["lossy"] is False
    assert "EAGLE head, dynamic tree of 8 nodes" in final[SPEC] and "sv-cand" in final[ROWS]


def test_the_hybrid_races_with_the_pairs_eagle_head_through_the_api(client, pair):
    """The pair brings its EAGLE heads (app.py --eagle); the hybrid takes them when asked for its EAGLE side."""
    job = client.submit(
        pair,
        "hybrid",
        "float32",
        "w1 w2 w3 w4 w1 w2 w3 w4 w1",
        4,
        30,
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
        hybrid_model="eagle",
        api_name="/run",
    )
    final = job.result(timeout=120)
    summary = final[SUMMARY]
    assert summary["finished"] and summary["identical"] is True, final[STATUS]
    assert "hybrid: lookup or the EAGLE head" in final[SPEC] and "from the prompt" in final[ROWS]
    assert "from the EAGLE head" in final[ROWS] and "from the draft model" not in final[ROWS]


def test_adaptive_gamma_shows_each_steps_choice_and_stays_identical(client, pair):
    final = run(client, pair, prompt="w1 w2 w3", drafter="draft", max_new=60, gamma=6, adaptive=True).result(
        timeout=120
    )
    summary = final[SUMMARY]
    assert summary["finished"] and summary["identical"] is True
    assert "adaptive γ ≤ 6" in final[SPEC]
    gammas = summary["speculative_gammas"]
    assert len(gammas) == summary["speculative"]["target_forwards"] and all(0 <= g <= 6 for g in gammas)
    assert f"γ {max(gammas)} · " in final[ROWS]  # every speculative row names the γ it was given


def test_an_int8_draft_races_and_the_target_still_decides(client, pair):
    job = client.submit(
        pair,
        "draft",
        "float32",
        "w1 w2 w3",
        3,
        40,
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
        "int8",
        api_name="/run",
    )
    final = job.result(timeout=120)
    summary = final[SUMMARY]
    assert summary["finished"] and summary["identical"] is True
    assert summary["speculative"]["acceptance_rate"] is not None and "draft int8" in final[STATUS]
    refused = client.submit(
        pair,
        "draft",
        "float32",
        "w1",
        3,
        4,
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
        "int3",
        api_name="/run",
    )
    with pytest.raises(AppError):  # not a choice of the menu: Gradio refuses it in one line
        refused.result(timeout=60)
    assert run(client, pair, max_new=4).result(timeout=60)[SUMMARY]["finished"]


def test_any_target_and_draft_can_be_named_and_raced(client, app_server):
    target_folder, draft_folder = app_server[1].split(" ← ")
    menu, status = client.predict(target_folder, target_folder, api_name="/add_pair")
    label = menu["value"]  # the pair menu, updated: the new pair among its choices, chosen
    assert label == f"{target_folder} ← {target_folder}" and [label, label] in menu["choices"] and "pair:" in status
    final = run(client, label, max_new=12).result(timeout=120)
    assert final[SUMMARY]["finished"] and final[SUMMARY]["identical"] is True
    _, status = client.predict("", draft_folder, api_name="/add_pair")
    assert "error: name both a target and a draft" in status


def test_a_bfloat16_race_runs_in_exact_mode_and_the_badge_says_what_its_identity_rests_on(client, pair):
    cases = (
        (dict(dtype="bfloat16"), "; exact mode<", "bit for bit by construction"),
        (dict(dtype="bfloat16", exact=False), "; exact mode off<", None),
        (dict(dtype="float32"), "exact mode off: it covers bfloat16 and int8 targets, and this one is float32", None),
    )
    for values, status, promise in cases:
        final = client.predict(
            pair=pair, drafter="ngram", prompt="w1 w2 w3 w1 w2", max_new=30, api_name="/run", **values
        )
        assert final[SUMMARY]["identical"] is True and status in final[STATUS], final[STATUS]
        assert (promise in final[BADGE]) if promise else "by construction" not in final[BADGE], final[BADGE]
