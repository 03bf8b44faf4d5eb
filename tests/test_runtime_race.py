"""The same drafter on two runtimes, side by side: every lane of a race on transformers and on llama.cpp, each beside
its own plain decoding, each greedy lane writing its own runtime's plain tokens, and the sentence that says why the
speedups differ, from the race's own timings; recorded and snapshotted like every race."""

import json

import pytest
from test_cli import run_cli

from specviz.events import PLAIN, StepEvent
from specviz.render.runtime_compare import runtime_comparison
from specviz.trace import Trace
from specviz.views.grand_prix import GrandPrixView, RaceLane, from_trace
from specviz.views.runtimes import compared, sentence


def step(i, proposed=(), accepted=0, verify_s=0.1, draft_s=0.0):
    kind = "plain" if not proposed else "bonus" if accepted == len(proposed) else "correction"
    return StepEvent(index=i, proposed=tuple(proposed), accepted=accepted, next_token=7, next_kind=kind,
                     p=(0.9,) * len(proposed), q=None, draft_s=draft_s, verify_s=verify_s, step_s=verify_s + draft_s,
                     forward_tokens=1 + len(proposed))  # fmt: skip


def lane(name, drafter, runtime, events):
    out = RaceLane(name, drafter=drafter, runtime=runtime)
    for e in events:
        out.add(e)
    out.done = True
    return out


def test_the_sentence_says_why_the_same_drafter_pays_on_one_runtime_and_not_the_other():
    # transformers: a plain step 0.2 s, a verify of 5 tokens 0.22 s, drafts cheap and mostly held: it pays;
    # llama.cpp: a plain step 0.03 s, the drafter never drafted (no draft could pay): its curve from before the race
    slow = [step(i, verify_s=0.2) for i in range(8)]
    drafted = [step(i, (1, 2, 3, 4), 3, verify_s=0.22, draft_s=0.04) for i in range(4)]
    fast = [step(i, verify_s=0.03) for i in range(16)]
    view = GrandPrixView(
        lanes=[
            lane(PLAIN, PLAIN, "", slow),
            lane("draft", "draft", "", drafted),
            lane("plain · llama.cpp", PLAIN, "llama.cpp", fast),
            lane("draft · llama.cpp", "draft", "llama.cpp", fast),
        ],
        greedy=True,
        max_new_tokens=16,
        finished=True,
    )
    sides = compared(view, "transformers", {"llama.cpp": {1: 1.0, 2: 1.6, 4: 2.9, 8: 5.0}})["draft"]
    assert [s.runtime for s in sides] == ["transformers", "llama.cpp"]
    bf16, q4 = sides
    assert bf16.verify[5] == pytest.approx(1.1) and bf16.c == pytest.approx(0.05) and bf16.alpha == pytest.approx(0.75)
    assert bf16.speedup == pytest.approx((16 / 1.04) / (8 / 1.6))  # its tokens/s over its own runtime's plain's
    assert q4.speedup == pytest.approx(1.0) and not q4.drafted and q4.verify[4] == 2.9
    said = sentence("draft", sides)
    assert "on transformers a verify of 5 tokens cost 1.1 plain steps" in said
    assert "on llama.cpp a verify of 5 tokens cost 3.4 plain steps" in said and "decoded plainly" in said
    page = runtime_comparison(view, "transformers", {"llama.cpp": {1: 1.0, 2: 1.6, 4: 2.9, 8: 5.0}})
    assert 'id="sv-runtimes"' in page and "draft · llama.cpp" in page and page.count("<tr>") == 3
    view.lanes[1].drafter = view.lanes[3].drafter = "<b>draft</b>"
    assert "<b>" not in runtime_comparison(view, "transformers") and "&lt;b&gt;" in runtime_comparison(
        view, "transformers"
    )


def test_a_race_on_both_runtimes_puts_every_lane_beside_its_own_plain_and_says_why(
    capsys, pair_folders_with_gguf, tmp_path
):
    target, draft = (str(p) for p in pair_folders_with_gguf)
    path = tmp_path / "runtimes.json"
    code, out, err = run_cli(
        capsys,
        *["race", "--target", target, "--draft", draft, "--prompt", "w1 w2 w3 w1 w2 w3", "--no-chat"],
        *["--drafters", "ngram,draft", "--runtimes", "transformers,llama.cpp", "--max-new-tokens", "12"],
        *["--json", "--trace", str(path)],
    )
    assert code == 0, err
    race = json.loads(out)
    lanes = {lane["name"]: lane for lane in race["lanes"]}
    assert {"plain", "ngram", "draft", "plain · llama.cpp", "ngram · llama.cpp", "draft · llama.cpp"} <= set(lanes)
    assert lanes["draft · llama.cpp"]["runtime"] == "llama.cpp" and lanes["draft"]["runtime"] == ""
    for name in ("ngram", "draft"):  # each greedy lane writes its own runtime's plain tokens
        assert lanes[name]["tokens"] == lanes["plain"]["tokens"]
        assert lanes[f"{name} · llama.cpp"]["tokens"] == lanes["plain · llama.cpp"]["tokens"]
        assert lanes[f"{name} · llama.cpp"]["identical"]
    assert set(race["runtimes"]) >= {"ngram", "draft"} and "on llama.cpp" in race["runtimes"]["draft"]
    assert "why: draft: on transformers" in err
    recorded = from_trace(Trace.load(path))
    assert recorded.runtime == "transformers" and "llama.cpp" in recorded.curves
    assert recorded.lane("draft · llama.cpp").runtime == "llama.cpp"
    from specviz.render.snapshot import snapshot_html

    page = snapshot_html(Trace.load(path))
    assert 'id="sv-runtimes"' in page and "ngram · llama.cpp" in page


@pytest.mark.parametrize("name", ["medusa", "eagle", "dflash"])
def test_a_head_that_reads_hidden_states_says_in_one_line_why_it_does_not_run_on_llama_cpp(name):
    from specviz.drafters.registry import kind
    from specviz.errors import RuntimeUnsupported
    from specviz.runtimes.runtime_registry import runtime

    k = kind(name)
    with pytest.raises(RuntimeUnsupported, match=f"^{name} does not run on llama.cpp: its "):
        k.check_for(k.parse({}), "any", runtime("llama.cpp"))
