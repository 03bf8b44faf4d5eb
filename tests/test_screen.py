"""The screen's pure-Python parts on real engine events: the step explanation, traces (write, read, refuse), replay at
a recorded pace, the offline snapshot page, the drafter comparison, and the CLI's --trace and snapshot."""

import json

import pytest

from specviz.cli import main
from specviz.events import StepEvent
from specviz.record import TokenTexts, divergence, make_trace
from specviz.render import panels
from specviz.render.explain import explain_step
from specviz.render.snapshot import final_view, snapshot_html
from specviz.runs import generate_named
from specviz.settings import Settings
from specviz.trace import VERSION, RunModels, Side, Trace, TraceError
from specviz.views.grand_prix import KIND, GrandPrixView, RaceLane, from_trace
from specviz.views.race import Lane, RaceView
from specviz.views.replay import replay

EVIL = '<script>alert(1)</script><img src=x onerror="alert(2)">'


def race_trace(target, drafts, tokenizer, drafter="draft", prompt="w1 w2 w3", **settings):
    s = Settings(**{"max_new_tokens": 30, "gamma": 3, **settings})
    ids = tokenizer.encode(prompt)
    plain = list(generate_named(target, ids, s))
    spec = list(generate_named(target, ids, s, drafter, drafts["partial"]))
    text_of = TokenTexts(tokenizer)
    parted = (
        divergence(target, ids, [t for e in plain for t in e.tokens], [t for e in spec for t in e.tokens], text_of)
        if s.greedy
        else None
    )
    sides = [Side("plain", "", plain), Side(drafter, f"{drafter}; lossless", spec, parted)]
    models = RunModels(target="tiny", pair="tiny", precision="float32", device="cpu")
    return make_trace(
        kind="race", prompt=prompt, prompt_ids=ids, settings=s, models=models, sides=sides, text_of=text_of
    )


@pytest.fixture(scope="module")
def sampled(target, drafts, tokenizer):
    return race_trace(target, drafts, tokenizer, temperature=1.0, seed=3)


def test_a_rejected_sampled_step_is_explained_with_p_q_the_draw_and_the_residual(sampled):
    events = sampled.spec.events
    step = next(e for e in events if e.next_kind == "correction" and e.q is not None)
    html = explain_step(step, sampled.text_of, len(events))
    assert f"Step {step.index + 1}</b> of {len(events)}" in html
    assert "sv-bar-p" in html and "sv-bar-q" in html and "sv-bar-r" in html
    assert "min(1, p/q)" in html and "norm(max(0, p − q))" in html and "rejected" in html
    rejected = step.detail.trials[-1]
    assert not rejected.accepted and f"u = {rejected.u:.3f}" in html and f"q = {rejected.q:.3f}" in html
    assert 'class="sv-drafted' in html and "sv-emitted" in html


def test_greedy_tree_and_plain_steps_are_explained_in_their_own_words(target, drafts, tokenizer):
    trace = race_trace(target, drafts, tokenizer, drafter="history", prompt="w5 w5 w5 w9 w5 w5 w5", max_new_tokens=60)
    events = trace.spec.events
    tree = next(e for e in events if e.candidates)
    html = explain_step(tree, trace.text_of)
    assert "candidates</b>, verified together as a token tree" in html and "first choice here" in html
    plain_step = next(e for e in events if not e.proposed)
    assert "a plain step" in explain_step(plain_step, trace.text_of)
    assert "pick a step" in explain_step(None, str)


def test_the_explanation_escapes_token_text(sampled):
    step = next(e for e in sampled.spec.events if e.proposed)
    html = explain_step(step, lambda t: EVIL)
    assert "<script" not in html and "<img" not in html and "&lt;script&gt;" in html


def test_a_trace_survives_a_file_and_replays_to_the_same_screen(sampled, tmp_path):
    path = sampled.save(tmp_path / "run.json")
    again = Trace.load(path)
    assert again == sampled
    paused = []
    views = list(replay(again, speed=4.0, sleep=paused.append))
    steps = [e for s in again.sides for e in s.events]
    assert len(paused) == len(steps) and sum(paused) == pytest.approx(sum(e.step_s + e.prefill_s for e in steps) / 4)
    final = views[-1]
    assert final.finished and final.plain.tokens == sampled.plain.tokens and final.spec.tokens == sampled.spec.tokens
    lanes = [
        Lane(name, side.events, sum(e.prefill_s + e.step_s for e in side.events), True)
        for name, side in zip(("plain", "speculative"), sampled.sides)
    ]
    plain, spec = lanes
    live = RaceView(
        plain=plain, spec=spec, text_of=sampled.text_of, greedy=False, finished=True, mode=sampled.spec.words
    )
    for render in (
        lambda v: panels.lane_text(v, "plain"),
        lambda v: panels.lane_text(v, "spec"),
        panels.identity_badge,
        panels.metrics_strip,
    ):
        assert render(final) == render(live)


def test_traces_from_elsewhere_are_refused_in_one_line(sampled, tmp_path):
    newer = {**sampled.to_json(), "version": VERSION + 1}
    broken = {**sampled.to_json(), "sides": [{"name": "plain"}]}
    cases = [
        (newer, "newer specviz"),
        (broken, "damaged"),
        ({"hello": 1}, "not a specviz trace"),
        ([1, 2], "not a specviz trace"),
    ]
    for data, words in cases:
        with pytest.raises(TraceError, match=words) as refused:
            Trace.from_json(data)
        assert "\n" not in str(refused.value)
    (tmp_path / "junk.json").write_bytes(b"\xff\xfe not json")
    with pytest.raises(TraceError, match="cannot read a trace from junk.json"):
        Trace.load(tmp_path / "junk.json")


def test_the_snapshot_page_is_self_contained_and_escaped(target, drafts, tokenizer):
    trace = race_trace(target, drafts, tokenizer)
    trace.prompt = EVIL
    html = snapshot_html(trace)
    assert "<script" not in html and "<img" not in html and "&lt;script&gt;alert(1)" in html
    assert "http://" not in html and "https://" not in html  # nothing to fetch
    assert "<polyline" in html and 'class="sv-fig1"' in html and "identical to plain decoding" in html
    assert final_view(trace).spec.tokens == trace.spec.tokens


def test_a_grand_prix_table_lists_every_lane_with_its_verdict(target, drafts, tokenizer):
    s = Settings(max_new_tokens=20, gamma=3)
    ids = tokenizer.encode("w5 w5 w5 w9 w5 w5")
    lanes = [RaceLane("plain")] + [RaceLane(name, drafter=name, words=name) for name in ("draft", "ngram")]
    lanes.append(RaceLane("medusa", drafter="medusa", note="not available: no Medusa heads for 'tiny' <b>"))
    drafted = (generate_named(target, ids, s, n, drafts["partial"]) for n in ("draft", "ngram"))
    runs = [generate_named(target, ids, s), *drafted]
    for lane, events in zip(lanes, runs):
        for event in events:
            lane.add(event)
    lanes[-1].done = True
    view = GrandPrixView(lanes=lanes, greedy=True, max_new_tokens=20, finished=True)
    rows = {r.name: r for r in view.rows()}
    assert set(rows) == {"plain", "draft", "ngram", "medusa"} and rows["plain"].speedup == 1.0
    assert rows["draft"].identical is True and rows["draft"].tau > 1 and rows["medusa"].note.startswith("not available")
    assert sorted(r.place for r in rows.values() if r.place) == [1, 2, 3]  # every lane that raced has a place
    table = panels.compare_table(view.rows())
    assert table.count("<tr>") == 5 and "not available" in table and "&lt;b&gt;" in table and "<b>" not in table
    assert table.count('<svg class="sv-spark"') == 2  # α by position as small bars on one line, per drafting lane
    trace = make_trace(
        kind=KIND,
        prompt="w5",
        prompt_ids=ids,
        settings=s,
        models=RunModels(),
        sides=[Side(lane.name, lane.words, lane.events) for lane in lanes],
        text_of=TokenTexts(tokenizer),
        extra=view.record(),
    )
    back = from_trace(Trace.from_json(json.loads(json.dumps(trace.to_json()))))
    assert [lane.name for lane in back.drafted] == ["draft", "ngram", "medusa"]
    assert back.lane("medusa").note.startswith("not available") and back.lane("draft").tokens == lanes[1].tokens
    assert "Every lane of the Grand Prix" in snapshot_html(trace)


def test_generate_records_a_race_and_snapshot_draws_it(capsys, model_folder, tmp_path):
    path, page = tmp_path / "run.json", tmp_path / "run.html"
    code = main(
        [
            "generate",
            "--target",
            str(model_folder),
            "--draft",
            str(model_folder),
            "--prompt",
            "w1 w2 w3",
            "--no-chat",
            "--max-new-tokens",
            "12",
            "--dtype",
            "float32",
            "--trace",
            str(path),
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    trace = Trace.load(path)
    assert [s.name for s in trace.sides] == ["plain", "draft"] and trace.spec.tokens == out["token_ids"]
    assert trace.plain.tokens == out["token_ids"] and trace.spec.divergence is None
    assert trace.made_with.startswith("python -m specviz generate") and trace.models.precision == "float32"
    assert main(["snapshot", str(path), "--out", str(page)]) == 0 and "identical to plain decoding" in page.read_text()
    (tmp_path / "bad.json").write_text(json.dumps({"format": "specviz-trace", "version": 99}))
    assert main(["snapshot", str(tmp_path / "bad.json"), "--out", str(page)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: this trace is version 99")


def test_the_shipped_recorded_runs_replay_with_everything_they_show():
    from specviz.app.ui.handlers import recorded_runs
    from specviz.record import token_ids

    runs = recorded_runs()
    assert [label.split(":")[0] for label, _ in runs] == [
        "code-draft-model",
        "extraction-ngram",
        "grand-prix-code",
        "prose-draft-model-sampled",
    ]
    for _, path in runs:
        trace = Trace.load(path)
        assert trace.models.target == "qwen2.5-coder-1.5b-instruct" and trace.made_with.startswith("python -m specviz")
        assert all(t in trace.texts for side in trace.sides for t in token_ids(side.events))
        assert final_view(trace).spec.tokens == trace.spec.tokens
        assert any(e.detail and e.detail.trials for e in trace.spec.events)
        if trace.greedy:  # recorded with greedy decoding: the speculative side wrote the target's own tokens
            assert trace.spec.tokens == trace.plain.tokens


def test_a_copied_draft_says_where_it_came_from_on_screen_and_in_the_trace(target, tokenizer):
    from specviz.drafters.suffix_index import RunMemory
    from specviz.render.figure1 import step_row

    memory, ids = RunMemory(), tokenizer.encode("w4 w9 w2 w7")
    settings = Settings(max_new_tokens=20, gamma=6)
    list(generate_named(target, ids, settings, "suffix", memory=memory))
    events = list(generate_named(target, ids, settings, "suffix", memory=memory))
    copied = [e for e in events if e.origin == "an earlier run"]
    assert copied, "the second run drafts from the first"
    text_of = TokenTexts(tokenizer)
    assert "from an earlier run" in step_row(copied[0], text_of)
    assert "The draft was copied from an earlier run." in explain_step(copied[0], text_of)
    assert StepEvent.from_json(copied[0].to_json()) == copied[0]
    plain_row = [e for e in events if not e.proposed]
    assert all("from " not in step_row(e, text_of) for e in plain_row)


def test_an_event_whose_counts_do_not_hold_is_refused_even_under_python_O(sampled, new_process):
    """Counts are checked by a typed error, not by assert (which python -O drops): a trace whose step accepted more
    drafts than it proposed is refused as damaged in one line, optimised or not."""
    import json

    data = sampled.to_json()
    data["sides"][1]["events"][0]["accepted"] = 99
    code = (
        "import json, sys; from specviz.trace import Trace, TraceError\n"
        "try:\n    Trace.from_json(json.loads(sys.stdin.read()))\nexcept TraceError as e:\n    print(e)"
    )
    for flags in ([], ["-O"]):
        done = new_process(*flags, "-c", code, input=json.dumps(data), timeout=60)
        assert "damaged" in done.stdout and "accepted of" in done.stdout and done.stdout.count("\n") == 1, done
