"""Take it to production: every drafter kind gets, for transformers, vLLM and SGLang, a setting or the reason there is
none; the transformers script, executed on the tiny pair, writes specviz's greedy tokens; every key it names is in
docs/production.md with its source; the block escapes what it shows and rides in the JSON, the trace and its page."""

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
from test_cli import run_cli
from tiny import PAIR_WORDS, tiny_llama, word_tokenizer

from specviz.drafters.registry import kind, kinds
from specviz.render.handoff_block import production_block, shared_notes
from specviz.render.snapshot import snapshot_html
from specviz.serving.engine_settings import ENGINES, handoff
from specviz.serving.handoff import Handoff, Ran, recorded
from specviz.settings import Settings
from specviz.trace import Trace

DOC = (Path(__file__).resolve().parents[1] / "docs" / "production.md").read_text(encoding="utf-8")
EVIL = '<img src=x onerror="window.__pwned=1">'


ADAPTIVE = Settings(gamma=4, adaptive=True)


def every_kind(settings=ADAPTIVE):
    options = {k.name: k.parse(dict(k.listing.preferred)) for k in kinds()}
    return [
        handoff(Ran(k.name, settings, options[k.name], "Org/Target", "Org/Draft", serving=k.serving)) for k in kinds()
    ]


def test_every_drafter_kind_has_a_setting_or_a_reason_for_every_engine():
    for h in every_kind():
        assert [s.engine for s in h.settings] == list(ENGINES)
        for s in h.settings:
            assert s.text or s.nearest, (h.drafter, s.engine)  # a setting, or why there is none


def keys_named(h: Handoff) -> set[str]:
    """The engine keys a handoff names: generate()'s keywords, the --speculative-config fields, SGLang's flags."""
    found = set()
    for s in h.settings:
        if s.engine == "transformers":
            call = s.text[s.text.find("model.generate(") :].split("\n")[0]
            found |= set(re.findall(r"(\w+)=", call))
        elif s.engine == "vLLM" and s.text:
            found |= set(json.loads(s.text[s.text.index("'") + 1 : s.text.rindex("'")]))
        elif s.engine == "llama.cpp" and s.text:
            found |= set(re.findall(r"(?:^|\s)(-{1,2}[a-z][\w-]*)", s.text))
        elif s.text:
            found |= set(re.findall(r"(--speculative-[\w-]+)", s.text))
    return found


def test_every_key_named_is_listed_in_the_production_page_with_its_source():
    table = ([1, 4, 3], [5, 8, 0])
    ran = Ran(
        "draft",
        Settings(gamma=3),
        None,
        "T",
        "D",
        same_vocab=False,
        per_batch_size=table,
        serving=kind("draft").serving,
    )
    named = set().union(*(keys_named(h) for h in [*every_kind(), *every_kind(Settings(temperature=0.7)), handoff(ran)]))
    assert {"num_assistant_tokens", "prompt_lookup_min", "--speculative-algorithm"} <= named
    missing = sorted(k for k in named if f"`{k}`" not in DOC)
    assert not missing, missing
    assert DOC.count("https://") >= 6  # each engine's pages, named


@pytest.mark.parametrize("drafter", ["draft", "ngram", "eagle"])
def test_the_transformers_script_writes_specvizs_greedy_tokens(capsys, pair_folders, pair_eagle, drafter):
    target, draft = (str(p) for p in pair_folders)
    args = ["generate", "--target", target, "--prompt", "w1 w2 w3 w1 w2", "--no-chat", "--drafter", drafter]
    args += ["--max-new-tokens", "12", "--gamma", "3", "--dtype", "float32", "--device", "cpu", "--json"]
    args += {"draft": ["--draft", draft, "--draft-dtype", "float32"], "eagle": ["--eagle", str(pair_eagle)]}.get(
        drafter, []
    )
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    ran = json.loads(out)
    script = next(e for e in ran["production"]["engines"] if e["engine"] == "transformers")["text"]
    assert script and ("assistant_model" in script) == (drafter == "draft") and "assistant_tokenizer" not in script
    assert ("prompt_lookup_num_tokens" in script) == (drafter == "ngram")
    scope = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(script, "production.py", "exec"), scope)  # noqa: S102 - the script a user would paste
    assert scope["new_tokens"].tolist() == ran["token_ids"]


@pytest.fixture(scope="module")
def other_tokenizer_draft(tmp_path_factory):
    """A draft whose tokenizer numbers the target's words another way (reversed, some missing, some new)."""
    tok = word_tokenizer(PAIR_WORDS[:10:-1] + [f"v{i}" for i in range(12)])
    folder = tmp_path_factory.mktemp("other-tokenizer")
    tiny_llama(len(tok), seed=3).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def test_a_draft_with_another_tokenizer_is_handed_over_with_both_tokenizers(
    capsys, pair_folders, other_tokenizer_draft
):
    """Read from the loaded pair: another tokenizer adds transformers' tokenizer= and assistant_tokenizer= (the same
    vocabulary adds neither, as above), and the script, executed, still writes specviz's greedy tokens."""
    args = ["generate", "--target", str(pair_folders[0]), "--prompt", "w1 w2 w3 w1 w2", "--no-chat"]
    args += ["--drafter", "draft", "--draft", str(other_tokenizer_draft), "--draft-dtype", "float32"]
    args += ["--max-new-tokens", "12", "--gamma", "3", "--dtype", "float32", "--device", "cpu", "--json"]
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    ran = json.loads(out)
    script = next(e for e in ran["production"]["engines"] if e["engine"] == "transformers")["text"]
    assert "tokenizer=tokenizer, assistant_tokenizer=assistant_tokenizer" in script
    assert f"AutoTokenizer.from_pretrained({str(other_tokenizer_draft)!r})" in script
    scope = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(script, "production.py", "exec"), scope)  # noqa: S102 - the script a user would paste
    assert scope["new_tokens"].tolist() == ran["token_ids"]


def test_the_block_escapes_what_it_shows_and_a_trace_carries_it_to_its_page(tmp_path):
    h = handoff(
        Ran("draft", Settings(gamma=3), None, f"Org/{EVIL}", "Org/Draft", prompt=EVIL, serving=kind("draft").serving)
    )
    html = production_block([h])
    assert EVIL not in html and "&lt;img src=x" in html and "Take it to production" in html
    assert recorded({"production": [h.to_json()]}) == (h,)
    assert recorded({"production": "broken"}) == () and recorded({"production": [3, {"engines": 5}]})[0].settings == ()


def test_a_recorded_trace_shows_the_block_on_its_snapshot_page(capsys, pair_folders, tmp_path):
    target = str(pair_folders[0])
    path = tmp_path / "run.json"
    code, _, err = run_cli(
        capsys,
        *["generate", "--target", target, "--prompt", "w1 w2", "--no-chat", "--drafter", "ngram"],
        *["--max-new-tokens", "6", "--dtype", "float32", "--device", "cpu", "--trace", str(path)],
    )
    assert code == 0, err
    page = snapshot_html(Trace.load(path))
    assert 'class="sv-production"' in page and "prompt_lookup_num_tokens=" in page and "NGRAM" in page


def test_a_grand_prix_from_the_command_line_carries_every_lanes_settings(capsys, pair_folders):
    target, draft = (str(p) for p in pair_folders)
    code, out, err = run_cli(
        capsys,
        *["race", "--target", target, "--draft", draft, "--prompt", "w1 w2 w1 w2", "--no-chat"],
        *["--drafters", "draft@2,ngram@3", "--max-new-tokens", "6", "--dtype", "float32", "--device", "cpu", "--json"],
    )
    assert code == 0, err
    production = {h["name"]: h for h in json.loads(out)["production"]}
    assert set(production) == {"draft@2", "ngram@3"}
    vllm = {h: next(e for e in production[h]["engines"] if e["engine"] == "vLLM")["text"] for h in production}
    assert '"num_speculative_tokens": 2' in vllm["draft@2"] and '"method": "ngram"' in vllm["ngram@3"]


def test_the_block_says_once_what_every_engine_gives_up_and_copies_a_block_whole():
    draft = kind("draft")
    options = draft.parse({"draft_tree": "tree"})
    h = handoff(Ran("draft", ADAPTIVE, options, "Org/Target", "Org/Draft", serving=draft.serving))
    alike = set(shared_notes(h.settings))  # every engine gives up the tree and adaptive γ alike (each says what else)
    assert {"specviz checked several candidate continuations per step", "this engine checks one"} <= alike
    assert "specviz chose γ per step (up to 4) from measured costs" in alike
    page, app = production_block([h]), production_block([h], copy=True)
    assert page.count("specviz chose γ per step") == 1 and "in every engine:" in page
    assert "sv-prod-copy" not in page and "sv-prod-select" in page  # a page without script selects in one click
    assert app.count('class="sv-prod-copy"') == len(ENGINES) and "navigator.clipboard.writeText" in app
