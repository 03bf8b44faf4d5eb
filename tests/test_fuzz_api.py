"""The app's API under fuzz: every endpoint called over plain HTTP with one parameter at a time given junk a machine
chose (wrong types, huge and negative numbers, NaN, empty and long strings, lone surrogates, markup, control
characters, unknown option names). Each answer is a result or one line of error, never a traceback; the server
keeps serving, and a valid race after all of it still finishes identical to plain decoding."""

import json

import httpx
import pytest
from gradio_client import Client
from hypothesis import given, settings
from hypothesis import strategies as st

SUMMARY = 8  # /run's last output: the run in numbers

junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([float("nan"), float("inf"), -0.0, 1e308, 2**53 + 1]),
    st.sampled_from(["", "\ud800", "<script>alert(1)</script>", "\x00\x1b[2J", "x" * 20_000, "nan", "-1"]),
    st.text(max_size=12),
    st.lists(st.integers(-5, 5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


def endpoints(client) -> dict:
    return client.view_api(print_info=False, return_format="dict")["named_endpoints"]


def call(url: str, name: str, data: list) -> tuple[str, str]:
    """POST the endpoint as any HTTP client can (ASCII JSON carries a lone surrogate), then read its stream to the
    end: ("complete" or "error", the data of the last event)."""
    body = json.dumps({"data": data}, ensure_ascii=True, allow_nan=True)
    posted = httpx.post(
        f"{url}gradio_api/call{name}", content=body, headers={"content-type": "application/json"}, timeout=60
    )
    if posted.status_code != 200:
        return "refused", posted.text
    event = posted.json()["event_id"]
    lines = httpx.get(f"{url}gradio_api/call{name}/{event}", timeout=180).text.splitlines()
    ends = [i for i, line in enumerate(lines) if line in ("event: complete", "event: error")]
    assert ends, lines[-5:]
    return lines[ends[-1]].removeprefix("event: "), lines[ends[-1] + 1].removeprefix("data: ")


@st.composite
def junk_call(draw, api: dict):
    name = draw(st.sampled_from(sorted(n for n in api if n not in ("/replay", "/replay_grand_prix", "/stop"))))
    parameters = api[name]["parameters"]
    plain = [p for p in parameters if "file" not in json.dumps(p.get("python_type", {})).lower()]
    chosen = draw(st.sampled_from(plain))
    value = draw(junk)
    data = [value if p is chosen else p.get("parameter_default") for p in parameters]
    return name, chosen["parameter_name"], data


def check_answer(kind: str, answer: str, what: str) -> None:
    assert "Traceback" not in answer, (what, answer[:500])
    if kind == "error":
        message = json.loads(answer) if answer not in ("", "null") else None
        assert message is None or "\n" not in str(message).strip(), (what, str(message)[:500])
    for text in json.loads(answer) if kind == "complete" else []:
        if isinstance(text, str) and "sv-status-error" in text:  # specviz's own one-line refusal, not a crash
            assert "internal error" not in text and text.count("error: ") == 1, (what, text[:500])


@pytest.mark.budget(180, "every endpoint over HTTP, one junk parameter at a time, 80 requests")
@pytest.mark.parametrize("round_", [0])
def test_every_endpoint_under_junk_answers_in_one_line_and_keeps_serving(app_server, round_):
    url, pair = app_server
    client = Client(url, verbose=False)
    api = endpoints(client)

    @settings(max_examples=80)
    @given(junk_call(api))
    def answer(case):
        name, parameter, data = case
        if name in ("/run", "/sweep", "/compare", "/workload"):
            data[0] = data[0] if parameter == "pair" else pair  # a run on the pair the app serves
        names = [p["parameter_name"] for p in api[name]["parameters"]]
        if name == "/traffic":  # a few requests at a high rate: the screen's defaults wait a minute for arrivals
            for field, quick in (("rates", "50"), ("requests", 2)):
                data[names.index(field)] = data[names.index(field)] if parameter == field else quick
        kind, said = call(url, name, data)
        check_answer(kind, said, f"{name} {parameter}={str(data)[:200]}")
        httpx.post(f"{url}gradio_api/call/stop", json={"data": []}, timeout=30)

    answer()
    final = client.submit(
        pair,
        "draft",
        "float32",
        "w1 w2 w3",
        3,
        24,
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
        api_name="/run",
    ).result(timeout=120)
    summary = final[SUMMARY]
    assert summary["finished"] and summary["plain_tokens"] == summary["speculative_tokens"]


def test_a_pair_or_a_precision_that_is_no_name_is_refused_in_one_line(app_server):
    """Found by the fuzzing above: a list for the pair, or for a precision, reached a dictionary lookup ("internal
    error (TypeError): unhashable type")."""
    url, pair = app_server
    api = endpoints(Client(url, verbose=False))
    for name in ("/compare", "/run", "/load"):
        data = [p.get("parameter_default") for p in api[name]["parameters"]]
        data[0] = []
        kind, said = call(url, name, data)
        assert kind == "complete" and "a model pair is named by its label" in said and "internal error" not in said
    names = [p["parameter_name"] for p in api["/compare"]["parameters"]]
    data = [p.get("parameter_default") for p in api["/compare"]["parameters"]]
    data[0], data[names.index("draft_dtype")] = pair, []
    kind, said = call(url, "/compare", data)
    assert kind == "complete" and "precision must be one of" in said and "internal error" not in said
