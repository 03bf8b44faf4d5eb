"""The app's device side with tiny real models: the race, the identity check, stop, the sweep, loading once."""

import pytest
from tiny import tiny_llama, word_tokenizer

from specviz.app.backend import Backend
from specviz.app.shelf import ModelShelf, PairPreset
from specviz.engine import generate
from specviz.errors import InvalidRequest, SpecvizError
from specviz.events import generated_ids
from specviz.record import TokenTexts, divergence
from specviz.settings import Settings


@pytest.fixture(scope="module")
def backend(pair_folders):
    target, draft = pair_folders
    return Backend(ModelShelf([PairPreset("tiny", str(target), str(draft))], "cpu"))


def request(**over):
    return {"pair": "tiny", "drafter": "draft", "dtype": "float32", "prompt": "w1 w2 w3", "gamma": 3} | {
        "max_new_tokens": 40,
        **over,
    }


def test_a_greedy_race_is_identical_and_the_last_view_says_so(backend):
    views = list(backend.race(request()))
    final = views[-1]
    assert final.finished and not final.stopped and final.divergence is None
    assert final.plain.tokens == final.spec.tokens and len(final.plain.tokens) == 40
    assert all(e.next_kind == "plain" for e in final.plain.events)
    assert any(e.proposed for e in final.spec.events)
    steps = len(final.plain.events) + len(final.spec.events)
    assert sum(v is final for v in views) == steps + 1  # one view per step of either side, then the final one
    # the same as running the engine alone
    pair = backend.shelf.current()
    ids = pair.target.tokenizer.encode("w1 w2 w3")
    alone = generated_ids(generate(pair.target, ids, Settings(max_new_tokens=40)))
    assert final.plain.tokens == alone


def test_the_pair_loads_once_and_stays(backend):
    list(backend.race(request(max_new_tokens=2)))
    held = backend.shelf.current()
    assert list(backend.shelf.load("tiny", "float32")) == []  # nothing to do
    assert backend.shelf.current() is held


def test_a_pair_that_cannot_load_leaves_the_loaded_pair_in_place(pair_folders, tmp_path, monkeypatch):
    target, draft = pair_folders
    stranger = tmp_path / "stranger"  # a real model whose tokenizer shares no token with the target's
    tiny_llama(12, seed=3).save_pretrained(stranger)
    word_tokenizer([f"x{i}" for i in range(10)]).save_pretrained(stranger)
    shelf = ModelShelf(
        [
            PairPreset("tiny", str(target), str(draft)),
            PairPreset("hub", "someone/not-cached", str(draft)),
            PairPreset("no model", str(tmp_path / "empty"), str(draft)),
            PairPreset("stranger", str(target), str(stranger)),
        ],
        "cpu",
    )
    (tmp_path / "empty").mkdir()
    backend = Backend(shelf)
    list(backend.race(request(max_new_tokens=2)))
    held = shelf.current()
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there: the Hub is unreachable
    for label, words in (
        ("hub", "not reachable"),
        ("no model", "no config.json"),
        ("stranger", "shares no vocabulary"),
    ):
        with pytest.raises(SpecvizError, match=words) as failed:
            list(backend.race(request(pair=label, max_new_tokens=2)))
        assert "\n" not in str(failed.value) and shelf.current() is held, label
    with pytest.raises(InvalidRequest, match="dtype"):
        list(shelf.load("hub", "float16"))
    assert shelf.current() is held
    views = list(backend.race(request(max_new_tokens=2)))  # the next run finds the pair loaded
    assert views[-1].finished and not any(v.message.startswith("loading") for v in views)


def test_a_bad_request_fails_before_anything_loads(pair_folders):
    target, draft = pair_folders
    fresh = Backend(ModelShelf([PairPreset("tiny", str(target), str(draft))], "cpu"))
    for bad in (
        dict(gamma=0),
        dict(prompt=""),
        dict(drafter="none"),
        dict(temperature=-1),
        dict(drafter="medusa", acceptance="greedy", temperature=0.5),
        dict(medusa_tree="[[]]"),
    ):
        with pytest.raises(InvalidRequest):
            next(fresh.race(request(**bad)))
    assert fresh.shelf.current() is None
    with pytest.raises(InvalidRequest, match="unknown model pair"):
        next(fresh.race(request(pair="nope")))


def test_stop_ends_the_race_within_a_step(backend):
    seen = []

    def stopped():
        return len(seen) >= 5

    for view in backend.race(request(max_new_tokens=2000), stopped):
        seen.append(view)
    final = seen[-1]
    assert final.finished and final.stopped
    assert len(final.plain.events) + len(final.spec.events) == 5  # the step under way finished, no more
    assert final.divergence is None  # compared over what both produced


def test_divergence_names_the_position_and_the_targets_top_two(backend):
    pair = backend.shelf.current()
    ids = pair.target.tokenizer.encode("w1 w2 w3")
    plain = generated_ids(generate(pair.target, ids, Settings(max_new_tokens=6)))
    other = plain[:3] + [(plain[3] + 1) % 50 + 2] + plain[4:]
    d = divergence(pair.target, ids, plain, other, TokenTexts(pair.target.tokenizer))
    assert d.position == 3
    (top1, p1), (_, p2) = d.top
    assert top1 == d.plain_token and 1 >= p1 >= p2 > 0  # greedy plain picked the target's argmax
    assert divergence(pair.target, ids, plain, plain, str) is None


def test_sampled_races_are_not_compared_token_by_token(backend):
    final = list(backend.race(request(temperature=1.0, seed=5, max_new_tokens=12)))[-1]
    assert final.finished and not final.greedy and final.divergence is None


def test_the_sweep_measures_every_gamma_and_fits_the_theory(backend):
    views = list(backend.sweep(request(max_new_tokens=24), gammas=(1, 2, 3)))
    final = views[-1]
    assert final.finished and sorted(final.runs) == [1, 2, 3]
    points = final.points()
    assert [p.gamma for p in points] == [1, 2, 3] and all(p.tokens_per_s > 0 for p in points)
    theory = final.theory()
    assert 0 <= theory.alpha <= 1 and theory.c > 0 and theory.best_gamma in (1, 2, 3)
    for events in final.runs.values():  # greedy: every γ writes the plain text
        assert generated_ids(events) == generated_ids(final.plain)


def test_medusa_needs_heads_for_the_pair_and_loads_them_once(pair_folders, pair_heads):
    target, draft = pair_folders
    bare = Backend(ModelShelf([PairPreset("tiny", str(target), str(draft))], "cpu"))
    with pytest.raises(InvalidRequest, match="no Medusa heads for"):
        list(bare.race(request(drafter="medusa")))
    backend = Backend(ModelShelf([PairPreset("tiny", str(target), str(draft), (("medusa", str(pair_heads)),))], "cpu"))
    final = list(backend.race(request(drafter="medusa", medusa_tree="chain")))[-1]
    assert final.divergence is None and final.plain.tokens == final.spec.tokens
    assert final.mode.startswith("Medusa heads, chain tree") and not final.lossy
    heads = dict(backend.shelf.current().target.companions)  # loaded once, kept with the pair's target
    assert len(heads) == 1
    list(backend.sweep(request(drafter="medusa"), gammas=(1, 2)))
    assert backend.shelf.current().target.companions == heads
    assert all(backend.shelf.current().target.companions[k] is v for k, v in heads.items())


def test_eagle_needs_heads_for_the_pair_and_races_identical_to_plain(pair_folders, pair_eagle):
    target, draft = pair_folders
    bare = Backend(ModelShelf([PairPreset("tiny", str(target), str(draft))], "cpu"))
    with pytest.raises(InvalidRequest, match="no EAGLE heads for"):
        list(bare.race(request(drafter="eagle")))
    backend = Backend(ModelShelf([PairPreset("tiny", str(target), str(draft), (("eagle", str(pair_eagle)),))], "cpu"))
    final = list(backend.race(request(drafter="eagle", eagle_nodes=6)))[-1]
    assert final.divergence is None and final.plain.tokens == final.spec.tokens
    assert final.mode.startswith("EAGLE head, dynamic tree of 6 nodes") and not final.lossy
    assert any(e.candidates for e in final.spec.events)
    loaded = dict(backend.shelf.current().target.companions)  # the head: loaded once, kept with the pair's target
    list(backend.sweep(request(drafter="eagle", eagle_tree="chain"), gammas=(1, 2)))
    assert backend.shelf.current().target.companions == loaded


def test_each_visitor_drafts_only_from_their_own_earlier_runs(backend):
    """Suffix decoding copies from earlier runs, and its rejected drafts are shown on screen: one session's runs
    must never be drafted from in another's."""
    ask = request(drafter="suffix", prompt="w4 w9 w2 w7", max_new_tokens=30, gamma=8)
    first = list(backend.race(ask, session="alice"))[-1]
    again = list(backend.race(ask, session="alice"))[-1]
    other = list(backend.race(ask, session="bob"))[-1]
    assert first.spec.tokens == again.spec.tokens == other.spec.tokens == first.plain.tokens
    assert any(e.origin == "an earlier run" for e in again.spec.events)
    assert not any(e.origin == "an earlier run" for e in first.spec.events + other.spec.events)
    tau = lambda view: len(view.spec.tokens) / len(view.spec.events)  # noqa: E731
    assert tau(again) > 2 * tau(other)  # bob's run is a first run, like alice's first
    backend.memories.forget("alice")
    fresh = list(backend.race(ask, session="alice"))[-1]
    assert not any(e.origin == "an earlier run" for e in fresh.spec.events)


def test_the_sweep_and_the_grand_prix_leave_the_visitors_memory_as_it_was(backend):
    ask = request(drafter="suffix", prompt="w3 w8 w5", max_new_tokens=12)
    list(backend.race(ask, session="carol"))
    kept = [list(run.tokens) for run in backend.memories.of("carol").runs]
    list(backend.sweep(ask, gammas=[2, 4], session="carol"))
    list(backend.grand_prix(ask, session="carol"))
    assert [list(run.tokens) for run in backend.memories.of("carol").runs] == kept


def test_a_stopped_run_whose_outputs_part_asks_the_device_where(backend):
    """The server compares a stopped run's outputs itself and calls the device only where they really part."""
    list(backend.race(request(max_new_tokens=2)))
    prompt_ids, asked = [5, 6, 7], backend._check(request(), "")
    assert backend._parted(asked, prompt_ids, [8, 9, 10], [8, 9]) is None  # agree as far as both went
    parted = backend._parted(asked, prompt_ids, [8, 9, 10], [8, 11, 10])
    pair = backend.shelf.current()
    assert parted == divergence(pair.target, prompt_ids, [8, 9, 10], [8, 11, 10], TokenTexts(pair.target.tokenizer))
    assert parted.position == 1 and len(parted.top) == 2


def test_a_race_at_auto_precision_loads_what_the_measurement_chose_and_says_why(pair_folders, tmp_path, monkeypatch):
    """auto resolves before anything loads (from the configs and the device's measured costs, kept in the cache
    folder); the pair loads in the precision chosen, the race's first line names it, and Why this speedup carries the
    reason. Asking for auto again loads nothing; a draft cannot ask for auto."""
    from specviz.render import panels

    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    target, draft = pair_folders
    backend = Backend(ModelShelf([PairPreset("tiny", str(target), str(draft))], "cpu"))
    final = list(backend.race(request(dtype="auto", max_new_tokens=8)))[-1]
    pair = backend.shelf.current()
    assert pair.ask.dtype == "auto" and pair.choice is not None and pair.target.precision == pair.choice.dtype
    assert final.finished and final.divergence is None and final.plain.tokens == final.spec.tokens
    assert final.precision == pair.choice.reason and "(auto: measured fastest on this device)" in pair.precision_words()
    assert escape_free(panels.diagnosis(final)).count(pair.choice.reason) == 1
    assert list(backend.shelf.load("tiny", "auto")) == [] and backend.shelf.current() is pair
    with pytest.raises(InvalidRequest, match="precision must be one of same"):
        list(backend.race(request(dtype="auto", draft_dtype="auto")))


def escape_free(page: str) -> str:
    import html

    return html.unescape(page)
