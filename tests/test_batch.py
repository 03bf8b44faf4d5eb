"""Several prompts decoded together: every row writes what its prompt writes alone (bit for bit in exact mode), rows
leave the batch as they finish, sampled rows follow the target's law, and adaptive γ backs off as the batch grows."""

import random
from collections import Counter

import pytest
import torch
from laws import REFUSED, RUNS, exact_law
from tiny import loaded, perturbed, tiny_llama

from specviz.analysis.stats import chi_square_p
from specviz.drafters.draft_batch import BatchedDraftModel
from specviz.drafters.registry import build_drafter, build_row_drafting
from specviz.engine import generate, new_generator
from specviz.engine.admission import Admission
from specviz.engine.batch_gamma import BatchGamma, ForwardCosts
from specviz.engine.batched_lm import BatchedLM, Feed
from specviz.engine.cached_lm import CachedLM
from specviz.engine.loop import generate_rows
from specviz.engine.step import BaseDrafter, DrafterProfile, EachRow, Proposal, Verdict
from specviz.engine.tree import build_tree
from specviz.errors import InvalidRequest
from specviz.events import generated_ids
from specviz.models.exact import set_exact
from specviz.settings import Settings

LOOKUPS = ("ngram", "history", "suffix")


def batch(target, prompts, settings, drafter="none", draft=None, concurrent=False):
    """Each row's tokens, and every event's (row, batch) in the order they came, decoding all prompts together."""
    generators = [new_generator(target.device, settings.seed + r) for r in range(len(prompts))]
    drafting = build_row_drafting(drafter, settings, generators, target, draft, concurrent=concurrent)
    out, seen = {r: [] for r in range(len(prompts))}, []
    for row, event in generate_rows(target, prompts, settings, drafting, generators):
        out[row].extend(event.tokens)
        seen.append((row, event.batch))
    return [out[r] for r in range(len(prompts))], seen


def alone(target, prompt, settings):
    return generated_ids(generate(target, prompt, settings))


@pytest.fixture(scope="module")
def bf16(tokenizer):
    """The tiny target and a partly agreeing draft in bfloat16, the target in exact mode."""
    target = loaded(tiny_llama(len(tokenizer), seed=1).to(torch.bfloat16), tokenizer, "tiny-bf16")
    draft = loaded(perturbed(tiny_llama(len(tokenizer), seed=1), seed=3, scale=0.3).to(torch.bfloat16), tokenizer)
    assert set_exact(target.model, True) == ""
    return target, draft


def prompts_of(tokenizer, n=5):
    """Prompts of different lengths, each repeating a little (so lookups find something to copy)."""
    return [tokenizer.encode(" ".join(f"w{(3 * i + j % (2 + i)) % 30}" for j in range(2 + 3 * i))) for i in range(n)]


FIXED, ADAPTIVE = Settings(max_new_tokens=16, gamma=3), Settings(max_new_tokens=16, gamma=5, adaptive=True)


@pytest.fixture(scope="module")
def reference():
    """Each prompt decoded alone, once per model and settings."""
    found = {}

    def of(model, prompts, settings):
        key = (model.name, tuple(map(tuple, prompts)), settings)
        if key not in found:
            found[key] = [alone(model, p, settings) for p in prompts]
        return found[key]

    return of


def rows_as_alone(model, draft, tokenizer, reference, drafter, settings):
    prompts = prompts_of(tokenizer)
    rows, seen = batch(model, prompts, settings, drafter, draft)
    assert rows == reference(model, prompts, settings), settings
    assert max(b for _, b in seen) == len(prompts)


@pytest.mark.parametrize("drafter", ["none", "draft", *LOOKUPS])
def test_every_row_of_a_batch_writes_what_its_prompt_writes_alone(target, drafts, tokenizer, reference, drafter):
    for settings in (FIXED, ADAPTIVE):
        rows_as_alone(target, drafts["partial"], tokenizer, reference, drafter, settings)


def test_every_row_of_a_bfloat16_batch_writes_its_prompts_tokens_bit_for_bit_in_exact_mode(bf16, tokenizer, reference):
    target, draft = bf16
    for settings in (FIXED, ADAPTIVE):
        rows_as_alone(target, draft, tokenizer, reference, "draft", settings)


@pytest.mark.parametrize("drafter", ["none", *LOOKUPS])
def test_every_drafter_of_a_batch_in_bfloat16_writes_its_prompts_tokens_in_exact_mode(
    bf16, tokenizer, reference, thorough, drafter
):
    target, draft = bf16
    for settings in (FIXED, ADAPTIVE):
        rows_as_alone(target, draft, tokenizer, reference, drafter, settings)


def test_the_batch_of_one_is_the_loop_a_single_prompt_runs(target, drafts, tokenizer):
    """generate() is generate_rows() with one row: the same tokens and the same steps, with the batch's fields set."""
    prompt, settings = tokenizer.encode("w1 w2 w3 w1 w2"), Settings(max_new_tokens=16, gamma=3)
    gen = new_generator(target.device, 0)
    single = list(generate(target, prompt, settings, build_drafter("draft", settings, gen, target, drafts["partial"])))
    rows, _ = batch(target, [prompt], settings, "draft", drafts["partial"])
    assert rows == [generated_ids(single)]
    assert all(e.batch == 1 and e.batch_tokens == e.forward_tokens for e in single)


def test_rows_that_finish_leave_the_batch_and_the_others_go_on(tokenizer):
    """A short context gives the rows of longer prompts smaller budgets: they finish first, the batch shrinks, and
    every row still writes what it writes alone."""
    target = loaded(tiny_llama(len(tokenizer), seed=1, context=40), tokenizer, "tiny-short")
    prompts = [tokenizer.encode(" ".join(["w1"] * n)) for n in (4, 12, 20, 30)]
    settings = Settings(max_new_tokens=30, gamma=3)
    for drafter in ("none", "ngram"):
        rows, seen = batch(target, prompts, settings, drafter)
        assert rows == [alone(target, p, settings) for p in prompts]
        assert [len(r) for r in rows] == [30, 28, 20, 10]
        sizes = [b for _, b in seen]
        assert sizes[0] == 4 and sizes[-1] == 1 and sizes == sorted(sizes, reverse=True)  # rows only ever leave
        last = {row: i for i, (row, _) in enumerate(seen)}
        assert sorted(last, key=last.get) == [3, 2, 1, 0]  # the one with the least room leaves first


def test_the_draft_model_of_a_batch_drafts_every_row_in_the_same_forwards(target, drafts, tokenizer):
    prompts, settings = prompts_of(tokenizer, 4), Settings(max_new_tokens=12, gamma=4)
    generators = [new_generator(target.device, r) for r in range(4)]
    drafting = build_row_drafting("draft", settings, generators, target, drafts["partial"])
    assert isinstance(drafting, BatchedDraftModel)
    events = [e for _, e in generate_rows(target, prompts, settings, drafting, generators)]
    drafting_steps = [e for e in events if e.proposed]
    assert drafting_steps and all(e.draft_forwards <= settings.gamma for e in drafting_steps)  # γ forwards, not 4·γ


def test_the_draft_model_reads_and_feeds_only_the_rows_that_draft(target, drafts, tokenizer):
    """Under load adaptive γ takes plain steps and probes one row at a time: the draft model reads a row only at the
    first step it drafts and feeds only the rows drafting, so a probe costs the probing row's catch-up alone and a
    row that never drafts is never read; the others catch up when they draft, and a row that leaves is gone."""
    prompts, settings = prompts_of(tokenizer, 3), Settings(max_new_tokens=12, gamma=2)
    generators = [new_generator(target.device, r) for r in range(3)]
    drafting = build_row_drafting("draft", settings, generators, target, drafts["partial"])
    drafting.start(prompts[:2], target)
    texts = [list(p) + [5, 6] for p in prompts]  # two plain steps written
    assert drafting.propose(texts[:2], [0, 0]) == [None, None] and drafting.lm.rows == []
    assert drafting.behind(texts[:2]) == [len(t) - 1 for t in texts[:2]]  # unread: drafting would read it all
    drafting.observe([None, None], [1])  # the first row finished, never read
    drafting.start(prompts[2:], target)
    probe = drafting.propose(texts[1:], [0, 2])  # the row that joined last probes
    assert probe[0] is None and len(probe[1].candidates[0]) == 2
    assert drafting.slot == [None, 0] and drafting.lm.row_length(0) == len(texts[2]) + 1  # its text, root, a draft
    drafting.observe([None, Verdict((), 7)], [0, 1])  # its first draft was rejected; the target wrote 7
    texts[2] += [7]
    assert drafting.lm.lengths[drafting.slot[1]] == len(texts[2]) - 1  # all but the new root
    assert drafting.behind([texts[1], texts[2] + [9, 4]]) == [len(texts[1]) - 1, 2]  # then two plain steps
    both = drafting.propose([texts[1] + [8], texts[2]], [1, 1])  # now the other row too, read whole
    assert all(p is not None for p in both) and sorted(drafting.slot) == [0, 1] and drafting.caught == [1, 1]


def test_a_drafter_that_reads_the_targets_hidden_states_says_in_one_line_it_does_not_take_a_batch(target, tokenizer):
    class Head(BaseDrafter):
        profile = DrafterProfile(hidden_layers=(-1,))

        def propose(self, tokens, gamma):
            return Proposal(((tokens[-1],),))

    prompts = prompts_of(tokenizer, 2)
    with pytest.raises(InvalidRequest, match="does not decode a batch yet"):
        list(generate_rows(target, prompts, Settings(max_new_tokens=4), EachRow([Head(), Head()])))
    assert alone(target, prompts[0], Settings(max_new_tokens=4))  # one prompt: as ever


def test_the_hybrid_says_in_one_line_it_does_not_take_a_batch(target, drafts, tokenizer):
    generators = [new_generator(target.device, r) for r in range(2)]
    with pytest.raises(InvalidRequest, match="hybrid does not decode a batch yet") as caught:
        build_row_drafting("hybrid", Settings(), generators, target, drafts["partial"])
    assert "\n" not in str(caught.value)


def test_the_batched_cache_holds_each_row_as_its_own_cache_would(bf16, tokenizer):
    """Rows re-aligned after trees of different accepted paths hold, entry for entry, what a cache of the same row
    alone holds (bit for bit in exact mode); a row that leaves takes its entries with it."""
    target, _ = bf16
    prompts = prompts_of(tokenizer, 3)
    trees = [build_tree([[5, 6, 7], [8]]), build_tree([[9]]), build_tree([[10, 11], [10, 12]])]
    paths = [[0, 1], [], [0, 2]]
    batched = BatchedLM(target.model)
    batched.start(prompts)
    batched.extend([Feed.verify(p[-1], t) for p, t in zip(prompts, trees)])
    assert batched.columns == sum(len(p) - 1 for p in prompts) + 5 + 2 + 4  # packed: each row's root and nodes
    batched.keep([[0, *(1 + n for n in path)] for path in paths], staying=[0, 2])
    for i, (prompt, tree, path) in enumerate([(prompts[0], trees[0], paths[0]), (prompts[2], trees[2], paths[2])]):
        lm = CachedLM(target.model)
        lm.extend(torch.tensor(prompt[:-1]), last_only=True)
        lm.extend_tree(prompt[-1], tree)
        lm.keep(len(prompt), path)
        run = slice(batched.starts[i], batched.starts[i] + lm.length)
        for ours, theirs in zip(batched.kv.cache.layers, lm.kv.cache.layers):
            assert torch.equal(ours.keys[0, :, run], theirs.keys[0])
            assert torch.equal(ours.values[0, :, run], theirs.values[0])
    assert batched.rows == [0, 2] and batched.lengths == [len(prompts[0]) + 2, len(prompts[2]) + 2]


def test_adaptive_gamma_backs_off_as_the_batch_grows_and_comes_back_as_it_shrinks():
    """Measured costs of a device that is memory-bound up to 16 tokens and compute-bound beyond: a small batch drafts
    long, a large one decodes plainly, and γ returns when rows leave."""
    costs = ForwardCosts()
    for tokens in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        costs.note(tokens, 1.0 if tokens <= 16 else tokens / 16)
    controller = BatchGamma(8, costs, draft_per_token=0.05, bookkeeping=0.0)
    for row in range(32):
        controller.accepted[row], controller.tested[row] = 7.0, 10.0  # α 0.7 for every row
    small, large = controller.next_gamma(list(range(2))), controller.next_gamma(list(range(32)))
    assert small >= 4 and large == 0
    assert controller.next_gamma(list(range(3))) > 0  # the long tail: speculation is back
    assert [g for _, g in controller.chosen] == [small, large, controller.chosen[-1][1]]


def test_only_the_rows_whose_drafts_pay_draft_when_drafting_for_all_would_not():
    """Forwards that cost alike up to 16 positions, then grow with them; a drafted position 0.05 of one. Eight rows,
    two whose drafts hold 9 times in 10 and six whose drafts rarely do: drafting for all eight pays less than for
    the two alone (the packed forward charges each row its own positions), so only they draft; when every row's
    drafts hold, all of them do."""
    costs = ForwardCosts()
    for tokens in (1, 8, 16, 32, 64):
        costs.note(tokens, max(1.0, tokens / 16))
    controller = BatchGamma(8, costs, draft_per_token=0.05, bookkeeping=0.0)
    rows = list(range(8))
    controller.accepted = {0: 9.0, 1: 9.0} | dict.fromkeys(range(2, 8), 1.0)
    controller.tested = dict.fromkeys(rows, 10.0)
    gammas = controller.next_gammas(rows)
    assert gammas[0] == gammas[1] > 0 and gammas[2:] == [0] * 6
    rate, _, drafting = controller.best(rows)
    assert drafting == [0, 1] and rate > controller.rate(0, rows) > controller.rate(max(gammas), rows)
    controller.accepted = dict.fromkeys(rows, 9.0)
    assert all(controller.next_gammas(rows))


def test_when_plain_steps_win_one_row_at_a_time_probes_to_see_whether_acceptance_came_back():
    """Forwards that cost alike up to 16 positions, drafts that rarely hold and cost a fifth of a forward: plain steps
    win for 4 rows, but all-held drafts would pay, so now and then one row (each in turn) drafts, the others not; each
    probe that did not bring drafting back doubles the wait for the next (a probe pads the whole batch), up to a cap;
    once drafting pays again, the wait is back to probe_after."""
    costs = ForwardCosts()
    for tokens in (1, 4, 8, 16, 32, 64):
        costs.note(tokens, max(1.0, tokens / 16))
    controller = BatchGamma(8, costs, draft_per_token=0.2, bookkeeping=0.0, probe_after=3)
    rows = list(range(4))
    for row in rows:
        controller.accepted[row], controller.tested[row] = 1.0, 10.0  # α 0.1
    steps = [controller.next_gammas(rows) for _ in range(80)]
    probes = [i for i, s in enumerate(steps) if any(s)]
    assert probes == [3, 10, 23, 48, 73]  # waits of 3, 6, 12, then 24 = 8 × probe_after each time
    assert all(sum(g > 0 for g in steps[i]) == 1 for i in probes)
    assert [steps[i].index(max(steps[i])) for i in probes] == [0, 1, 2, 3, 0]  # each row in turn
    for row in rows:
        controller.accepted[row], controller.tested[row] = 9.0, 10.0  # acceptance came back: drafting pays
    assert controller.next_gamma(rows) > 0 and controller.probe_gap(4) == 3


def test_a_probe_tests_a_row_the_draft_has_read_rather_than_read_a_whole_text_for_one_step():
    """The same batch, rows 0 and 2 new to the draft (80 tokens unread each), rows 1 and 3 read but for their last
    draft: the probes take rows 1 and 3 in turn; once every row is new, the one with the fewest tokens unread."""
    costs = ForwardCosts()
    for tokens in (1, 4, 8, 16, 32, 64):
        costs.note(tokens, max(1.0, tokens / 16))
    controller = BatchGamma(8, costs, draft_per_token=0.2, bookkeeping=0.0, probe_after=1)
    controller.accepted, controller.tested = dict.fromkeys(range(4), 1.0), dict.fromkeys(range(4), 10.0)  # α 0.1
    rows, probed = list(range(4)), []
    for _ in range(40):
        step = controller.next_gammas(rows, [80, 0, 80, 1], [100] * 4)
        probed += [rows[i] for i, g in enumerate(step) if g]
    assert len(probed) >= 3 and probed[:3] == [1, 3, 1]
    controller.probe_gap = lambda rows: 0  # every plain step may probe now
    controller.plain_run = 1
    step = controller.next_gammas(rows, [80, 60, 90, 70], [100] * 4)
    assert [r for r, g in zip(rows, step) if g] == [1]


def test_the_wait_after_failed_probes_carries_to_the_next_run_and_to_wider_batches_only():
    """Probes that failed at 4 rows leave a long wait there for the next run of the same drafter (each run's first
    probes cost the whole batch a step), and at wider batches, where drafting pays less; not at fewer rows, nor for
    another drafter. Once drafting pays at some width, the waits at it and below are forgotten."""
    costs = ForwardCosts()
    for tokens in (1, 4, 8, 16, 32, 64):
        costs.note(tokens, max(1.0, tokens / 16))
    draft = costs.for_drafter("draft")
    first = BatchGamma(8, draft, draft_per_token=0.2, bookkeeping=0.0, probe_after=3)
    first.accepted, first.tested = {r: 1.0 for r in range(4)}, {r: 10.0 for r in range(4)}  # α 0.1
    for _ in range(40):
        first.next_gammas(list(range(4)))
    assert first.probe_gap(4) == 24
    later = BatchGamma(8, costs.for_drafter("draft"), draft_per_token=0.2, bookkeeping=0.0, probe_after=3)
    later.accepted, later.tested = first.accepted, first.tested
    steps = [later.next_gammas(list(range(4))) for _ in range(30)]
    assert [i for i, s in enumerate(steps) if any(s)] == [24]  # not after 3 plain steps, as a fresh run would
    assert later.probe_gap(6) == 24 and later.probe_gap(2) == 3
    assert BatchGamma(8, costs.for_drafter("ngram"), probe_after=3).probe_gap(4) == 3
    later.accepted = {r: 9.0 for r in range(4)}  # acceptance came back: drafting pays at 4 rows
    assert later.next_gamma(list(range(4))) > 0 and later.probe_gap(4) == 3


def test_each_drafter_keeps_its_own_draft_cost_and_all_share_the_targets_forward():
    """A draft model's position costs a forward of its own, a lookup's almost nothing: in one sweep of both, each
    adaptive lane prices its drafts by its own drafter's d_B, and both read the forward costs either measured."""
    costs = ForwardCosts()
    model, lookup = costs.for_drafter("draft"), costs.for_drafter("ngram")
    model.note_draft(4, 0.3)
    lookup.note_draft(4, 0.001)
    model.note(20, 1.0)
    assert costs.for_drafter("draft").draft_at(4) == pytest.approx(0.3) and lookup.draft_at(4) == pytest.approx(0.001)
    assert lookup.at(20, 4) == 1.0 and costs.at(20, 4) == 1.0


def test_no_probe_where_drafts_that_all_held_would_not_pay():
    """Every position costs alike (a compute-bound device): speculation cannot beat plain decoding at any
    acceptance, so a batch of 16 never drafts, not even to probe."""
    costs = ForwardCosts()
    for tokens in (1, 16, 32, 64, 128):
        costs.note(tokens, tokens / 16)
    controller = BatchGamma(8, costs, draft_per_token=0.05, bookkeeping=0.0, probe_after=3)
    assert not any(any(controller.next_gammas(list(range(16)))) for _ in range(20))


def test_no_probe_where_reading_the_rows_would_eat_all_that_held_drafts_give():
    """Forwards that cost alike up to 8 positions and a drafted position 0.6 of one: 4 rows drafting one position
    that held would give 1.25× plain. Rows the draft is 40 tokens behind on, with 4 tokens left, at a measured 0.01
    of a forward a token read: each step's share of the reading (0.2 of a forward a row) leaves no acceptance that
    could make drafting pay, so the batch never probes; with nothing to read, it does."""
    costs = ForwardCosts()
    for tokens in (1, 4, 8, 16, 32):
        costs.note(tokens, max(1.0, tokens / 8))
    for behind, probes in ((0, True), (40, False)):
        priced = costs.for_drafter(f"behind {behind}")
        priced.note_read(100, 1.0)
        controller = BatchGamma(4, priced, draft_per_token=0.6, bookkeeping=0.0, probe_after=3)
        controller.accepted, controller.tested = {r: 0.0 for r in range(4)}, {r: 10.0 for r in range(4)}
        steps = [controller.next_gammas(list(range(4)), [behind] * 4, [4] * 4) for _ in range(20)]
        assert any(any(s) for s in steps) == probes


def test_a_look_that_finds_no_acceptance_would_pay_waits_as_long_as_a_probe_before_the_next():
    """The batch above, its rows 40 tokens behind: after probe_after plain steps it looks whether drafts that all held
    would pay, finds they would not, and waits probe_after steps again before the next look (a full price of every
    option each step would cost a busy batch, and the traffic simulator at each of its steps, as much as a step's
    choice). Once nothing is left to read, the next look probes, at its time, not at once."""
    costs = ForwardCosts()
    for tokens in (1, 4, 8, 16, 32):
        costs.note(tokens, max(1.0, tokens / 8))
    costs.note_read(100, 1.0)
    controller = BatchGamma(4, costs, draft_per_token=0.6, bookkeeping=0.0, probe_after=3)
    controller.accepted, controller.tested = {r: 0.0 for r in range(4)}, {r: 10.0 for r in range(4)}
    runs = [(controller.next_gammas(list(range(4)), [40] * 4, [4] * 4), controller.plain_run)[1] for _ in range(4)]
    assert runs == [1, 2, 3, 0]  # three plain steps, then a look that found nothing: the count starts again
    steps = [controller.next_gammas(list(range(4)), [0] * 4, [4] * 4) for _ in range(4)]
    assert [any(s) for s in steps] == [False, False, False, True]


@pytest.mark.parametrize("drafter", ["draft", "ngram"])
def test_a_probe_of_one_row_in_a_bfloat16_batch_keeps_every_row_bit_for_bit(
    bf16, tokenizer, reference, drafter, monkeypatch
):
    """Steps where one row drafts (each in turn) and the others decode plainly beside it in the same forward, as
    adaptive's probes do: every row still writes what it writes alone."""
    target, draft = bf16
    prompts, settings = prompts_of(tokenizer, 4), Settings(max_new_tokens=24, gamma=4, adaptive=True)
    turn = iter(range(10_000))

    def probe(self, rows, behind=None, left=None):
        k = next(turn)
        return [3 if k % 2 and r == rows[k // 2 % len(rows)] else 0 for r in rows]

    monkeypatch.setattr(BatchGamma, "next_gammas", probe)
    generators = [new_generator(target.device, settings.seed + r) for r in range(len(prompts))]
    drafting = build_row_drafting(drafter, settings, generators, target, draft, concurrent=True)
    events = list(generate_rows(target, prompts, settings, drafting, generators, costs=ForwardCosts()))
    out, probes, at = {r: [] for r in range(len(prompts))}, [], 0
    while at < len(events):  # a step's events come together, one per row of its batch
        step = events[at : at + events[at][1].batch]
        if all(len(out[r]) < 12 for r, _ in step):  # far from the budget, which would shorten a row's γ
            probes.append(sorted(e.gamma for _, e in step))
        for row, event in step:
            out[row].extend(event.tokens)
        at += len(step)
    assert [out[r] for r in range(len(prompts))] == reference(target, prompts, Settings(max_new_tokens=24))
    assert [0, 0, 0, 3] in probes  # one row drafted, three did not


def test_what_a_drafted_position_costs_is_kept_with_the_forward_costs_for_the_next_run():
    """A run's adaptive γ starts from the draft cost earlier runs on the model measured, by batch size, rather than a
    guess of a tenth of a forward it would draft on while it learns."""
    costs = ForwardCosts()
    first = BatchGamma(4, costs, bookkeeping=0.0)
    first.observe(4, [(r, 4, 2, True) for r in range(4)], batch_tokens=20, draft_s=2.0, verify_s=1.0, bookkeeping_s=0)
    assert costs.draft_at(4) == pytest.approx(0.5) and costs.draft_at(8) == pytest.approx(0.5)
    costs.note(4, 1.0)
    rows, later = list(range(4)), BatchGamma(4, costs, bookkeeping=0.0)  # its rows' α: as `first`'s drafts held
    told = BatchGamma(4, ForwardCosts(dict(costs.seconds)), draft_per_token=0.5, bookkeeping=0.0, prior=later.prior)
    guessing = BatchGamma(4, ForwardCosts(dict(costs.seconds)), prior=later.prior)
    assert later.rate(2, rows) == pytest.approx(told.rate(2, rows)) and later.rate(2, rows) < guessing.rate(2, rows)


def test_a_row_new_to_a_run_starts_from_how_often_its_drafters_drafts_held_before():
    """Four rows, a forward that costs alike up to 40 positions, a drafted position 0.3 of it: at the fixed prior α
    0.7 two drafts a step pay best (5.5 tokens a forward against 5.0 at γ 4); after a run where the draft model's
    drafts all held, the next run's rows start near α 1 and draft 4. Another drafter's rows keep the fixed prior."""
    costs, rows = ForwardCosts(), list(range(4))
    for tokens in (4, 40):
        costs.note(tokens, 1.0)
    first = BatchGamma(4, costs.for_drafter("draft"), draft_per_token=0.3, bookkeeping=0.0)
    assert first.alpha(0) == pytest.approx(0.7) and first.next_gamma(rows) == 2
    for _ in range(10):
        first.observe(4, [(r, 4, 4, False) for r in rows], batch_tokens=20, draft_s=1.2, verify_s=1.0, bookkeeping_s=0)
    later = BatchGamma(4, costs.for_drafter("draft"), draft_per_token=0.3, bookkeeping=0.0)
    assert later.alpha(7) > 0.98 and later.next_gamma([4, 5, 6, 7]) == 4
    other = BatchGamma(4, costs.for_drafter("eagle"), draft_per_token=0.3, bookkeeping=0.0)
    assert other.alpha(7) == pytest.approx(0.7) and other.next_gamma([4, 5, 6, 7]) == 2


def test_a_row_left_out_for_one_rejected_draft_drafts_again_as_that_verdict_ages():
    """Forwards of 1 + 0.08·T, a drafted position 0.05; the drafter's rows hold 0.9 of the time. Three rows held 9
    drafts in 10, the fourth had its only draft rejected (α 0.58): it is left out while the others draft γ 4, and
    each step it sits out its one verdict counts less against what the drafter's rows hold, until it drafts again.
    Left out for good, it would write a token a step and end the batch alone."""
    costs, rows = ForwardCosts(), list(range(4))
    forward = lambda tokens: 1 + 0.08 * tokens  # noqa: E731
    for tokens in (1, 4, 8, 16, 20):
        costs.note(tokens, forward(tokens))
    controller = BatchGamma(4, costs, draft_per_token=0.05, bookkeeping=0.0, prior=0.9)
    controller.accepted, controller.tested = dict.fromkeys(range(3), 9.0) | {3: 1.62}, dict.fromkeys(range(3), 10.0)
    controller.tested[3] = 2.8
    alphas, steps = [], []
    for _ in range(20):
        alphas.append(controller.alpha(3))
        steps.append(gammas := controller.next_gammas(rows))
        if gammas[3]:
            break
        held = [(row, g, g, False) for row, g in zip(rows, gammas)]
        controller.observe(4, held, sum(gammas) + 4, 0.05 * 4, forward(sum(gammas) + 4), bookkeeping_s=0.0)
    assert steps[0] == [4, 4, 4, 0] and 3 < len(steps) <= 12 and steps[-1] == [4, 4, 4, 4]
    assert alphas[0] == pytest.approx(0.58, abs=0.01) and alphas == sorted(alphas) and alphas[-1] < 0.9


def test_in_a_batch_no_row_joins_the_row_that_would_end_it_alone_drafts_too():
    """Four rows with 30 tokens to go, drafts that hold 0.9 of the time; the draft has read three of them and is 200
    tokens behind on the fourth, at 0.01 s a token. Leaving the fourth out makes the faster step, but it would then
    write a token a step and finish alone long after the others: in a batch that opened with these rows it drafts
    too, since that step still beats a plain one. In a batch rows keep joining, the batch does not end with it, and
    it waits."""
    costs, rows = ForwardCosts(), list(range(4))
    for tokens in (1, 4, 8, 16, 20):
        costs.note(tokens, 1 + 0.05 * tokens)
    costs.note_read(100, 1.0)
    closed = BatchGamma(4, costs, draft_per_token=0.05, bookkeeping=0.0, prior=0.9)
    assert closed.next_gammas(rows, [0, 0, 0, 200], [30] * 4) == [4, 4, 4, 4]
    assert closed.rate(4, rows, [0, 1, 2]) > closed.rate(4, rows) > closed.rate(0, rows)
    joined = BatchGamma(4, costs, draft_per_token=0.05, bookkeeping=0.0, prior=0.9)
    assert joined.next_gammas(rows[:3], [0] * 3, [30] * 3) == [4] * 3
    assert joined.next_gammas(rows, [0, 0, 0, 200], [30] * 4) == [4, 4, 4, 0]


def test_drafting_for_rows_the_draft_is_behind_on_pays_its_share_of_reading_them():
    """One row, α 0.5, a drafted position 0.4 of a forward that costs alike up to 64 positions, a token read 0.01 of
    one: at γ 1 a step promises 1.5 tokens for 1.4 forwards. The draft is 30 tokens behind (plain steps wrote them):
    with 60 tokens left, each step's share of that read is 0.3 × 1.5 / 60 of a forward, and drafting comes back; with
    3 tokens left, half the read falls on this step and the row stays plain. Nothing behind: the steady rate."""
    costs = ForwardCosts()
    for tokens in (1, 64):
        costs.note(tokens, 1.0)
    costs.note_read(100, 1.0)
    controller = BatchGamma(1, costs, draft_per_token=0.4, bookkeeping=0.0)
    controller.accepted[0], controller.tested[0] = 5.0, 10.0
    assert controller.next_gammas([0], [0], [3]) == [1] and controller.rate(1, [0]) == pytest.approx(1.5 / 1.4)
    assert controller.next_gammas([0], [30], [60]) == [1]
    assert controller.rate(1, [0]) == pytest.approx(1.5 / (1.4 + 0.3 * 1.5 / 60))
    assert controller.next_gammas([0], [30], [3]) == [0]
    assert controller.rate(1, [0], [0]) == pytest.approx(1.5 / (1.4 + 0.3 * 0.5))


def test_what_a_token_read_costs_the_draft_is_measured_apart_from_a_drafted_position_and_kept():
    """Steps where no row is behind by more than its last draft teach d_B; a step where rows are behind teaches r,
    the draft's seconds over γ·d_B per token read, kept by drafter for the next run; before d_B is known, none."""
    costs = ForwardCosts()
    costs.note(4, 1.0)
    draft = costs.for_drafter("draft")
    guessing = BatchGamma(4, draft, bookkeeping=0.0)
    guessing.next_gammas(list(range(4)), [50] * 4, [20] * 4)
    guessing.observe(4, [(r, 4, 2, True) for r in range(4)], 20, draft_s=3.0, verify_s=1.0, bookkeeping_s=0.0)
    assert draft.read_cost() == 0.0 and draft.draft_at(4) is None  # no d_B yet: the read is not told from drafting
    controller = BatchGamma(4, draft, bookkeeping=0.0)
    controller.next_gammas(list(range(4)), [1, 0, 1, 0], [20] * 4)  # steady: at most the last draft unread
    controller.observe(4, [(r, 4, 2, True) for r in range(4)], 20, draft_s=0.4, verify_s=1.0, bookkeeping_s=0.0)
    assert draft.draft_at(4) == pytest.approx(0.1) and draft.read_cost() == 0.0
    controller.next_gammas(list(range(4)), [0, 0, 0, 80], [20] * 4)  # a row joined: its prompt is read
    controller.observe(4, [(r, 4, 2, True) for r in range(4)], 20, draft_s=1.2, verify_s=1.0, bookkeeping_s=0.0)
    assert draft.read_cost() == pytest.approx(0.01) and draft.draft_at(4) == pytest.approx(0.1)
    assert costs.for_drafter("draft").read_cost() == pytest.approx(0.01) and costs.for_drafter("ngram").read_cost() == 0


def test_rows_joining_a_batch_that_drafts_on_are_a_flow_every_drafting_step_pays_to_read():
    """Four rows, α 0.7, forwards that cost alike up to 32 positions, a drafted position 0.1 of one, a token read 0.01
    of one: a batch opening with 300-token prompts, 100 tokens left each, drafts (each read spread over its row's
    life). If a new row of 300 tokens then joins at every step, what drafting on will keep reading (the flow: the
    tokens joining per step, a moving average read as what the steps so far measured, not diluted by the zeros it
    started from) is 3 forwards a step, and plain steps win from the second join; a batch no one joins drafts on."""
    costs = ForwardCosts()
    for tokens in (1, 4, 32):
        costs.note(tokens, 1.0)
    costs.note_read(100, 1.0)
    joined, closed = (BatchGamma(4, costs, draft_per_token=0.1, bookkeeping=0.0) for _ in range(2))
    for controller in (joined, closed):
        controller.accepted, controller.tested = dict.fromkeys(range(20), 7.0), dict.fromkeys(range(20), 10.0)
        assert controller.next_gamma(list(range(4))) == 4 and controller.flow == 0.0  # its own prompts: no flow
    assert joined.next_gammas(list(range(4)), [300] * 4, [100] * 4)  # read when they first draft
    steps = [joined.next_gamma(list(range(k, k + 4)), [0, 0, 0, 300], [100] * 4) for k in range(1, 16)]
    assert steps[:1] == [4] and steps[1:9] == [0] * 8  # (then, after probe_after plain steps, a probe)
    assert joined.joining() == pytest.approx(300 * (1 - 0.9**15) / (1 - 0.9**17))  # 17 steps, 15 of them joins
    assert all(closed.next_gamma(list(range(4)), [0] * 4, [100] * 4) for _ in range(15)) and closed.flow == 0.0


def test_a_steps_price_is_rate_of_its_choice_and_no_count_of_the_rows_ranked_best_first_beats_it():
    """best() prices each count of the ranked rows from running sums (a step's choice in a handful of operations, so
    the traffic simulator can make it at each of 10,000 requests' steps): in random states (rows behind and not,
    joins and none, measured widths and draft costs) what it returns is what rate() says of its choice, and rate()
    prices no count of the rows, ranked as best() ranks them (what drafting adds to a row less its read, in plain
    tokens), above it, at any γ, as drafted or as if every draft held (in a batch no row joins, the last rows may
    draft at a lower rate than that: only a step no slower than plain's is asked of it there)."""
    rnd = random.Random(7)
    for _ in range(300):
        rows, costs = list(range(rnd.randint(1, 8))), ForwardCosts()
        for width in {1, *rnd.sample(range(2, 41), rnd.randint(0, 8))}:
            costs.note(width, 0.25 + 0.01 * width + 0.02 * rnd.random())
        for drafting in rnd.sample(range(1, 9), rnd.randint(0, 3)):
            costs.note_draft(drafting, 0.05 + 0.01 * drafting)
        costs.note_read(100, rnd.random())
        policy = BatchGamma(4, costs, bookkeeping=0.01, flow=rnd.choice([0.0, 50 * rnd.random()]), flow_steps=5)
        policy.accepted, policy.tested = {r: 4 * rnd.random() for r in rows}, dict.fromkeys(rows, 4.0)
        policy.behind = {r: rnd.choice([0, 1, rnd.randint(2, 200)]) for r in rows}
        policy.left, policy.rows = {r: rnd.randint(1, 30) for r in rows}, len(rows)
        plain = policy.rate(0, rows)
        for perfect in (False, True):
            rate, gamma, drafting = policy.best(rows, perfect)
            assert rate == pytest.approx(policy.rate(gamma, rows, drafting, perfect), rel=1e-12) and rate >= plain
            if not (perfect or policy.flow):  # a closed batch: with_last_rows may give up rate for the last rows
                continue
            for g in range(1, 5):
                read = {r: costs.read_cost() * policy.read_share(r, policy.made(r, g)) for r in rows}
                ranked = sorted(rows, key=lambda r: -(policy.made(r, g, perfect) - 1 - plain * read[r]))
                assert all(policy.rate(g, rows, ranked[:k], perfect) <= rate * (1 + 1e-12) for k in range(1, 9))


def test_a_probing_row_teaches_only_its_own_acceptance():
    controller = BatchGamma(4, ForwardCosts(), draft_per_token=0.05, bookkeeping=0.0)
    verdicts = [(0, 0, 0, False), (1, 4, 4, False), (2, 0, 0, False)]
    controller.observe(4, verdicts, batch_tokens=7, draft_s=0.2, verify_s=1.0, bookkeeping_s=0.0)
    assert controller.nodes_per_gamma == pytest.approx(1.0)  # one row sent γ nodes: a full chain, not a third of one
    assert controller.alpha(1) > controller.alpha(0) == controller.alpha(2)


def test_forward_costs_interpolate_between_and_extend_past_what_was_measured():
    costs = ForwardCosts()
    assert costs.at(8, 8) is None
    costs.note(8, 0.2)
    assert costs.at(8, 8) == 0.2 and costs.at(16, 8) > 0.2  # one width: a prior slope
    costs.note(24, 0.4)
    assert costs.at(16, 8) == pytest.approx(0.3) and costs.at(40, 8) == pytest.approx(0.6)


def test_forward_costs_past_what_was_measured_never_fall_nor_go_below_zero():
    """Past the ends a measured cost is extended along the nearest two widths, but a forward over more tokens never
    costs less, and none costs less than nothing (the line through two noisy timings could say either)."""
    costs = ForwardCosts()
    costs.note(8, 0.4)
    costs.note(16, 0.2)  # the wider forward happened to measure faster: the narrower one is read as no dearer
    assert costs.at(16, 8) == 0.2 and costs.at(12, 8) == 0.2 and costs.at(8, 8) == 0.2
    assert costs.at(64, 8) == 0.2 and costs.at(2, 8) == 0.2
    steep = ForwardCosts()
    steep.note(8, 0.1)
    steep.note(16, 0.5)
    assert steep.at(2, 8) == 0.0 and steep.at(24, 8) == pytest.approx(0.9)


def test_a_stall_of_the_machine_neither_stays_in_the_table_nor_makes_plain_steps_look_dear():
    """A timing ten times the truth (the machine busy elsewhere for a moment) counts as one of the last few, whose
    median is the cost; and a plain step is never read dearer than a wider forward measured, so adaptive γ, which
    stops taking a width it believes dear, cannot be kept drafting by one bad timing of a plain step."""
    costs = ForwardCosts()
    for seconds in (0.26, 2.4, 0.27, 0.25, 0.26):
        costs.note(8, seconds)
    assert costs.seconds[8] == pytest.approx(0.26)
    first = ForwardCosts()
    first.note(8, 2.4)  # the first timing of a plain step of 8 rows, stalled
    first.note(16, 0.45)  # drafting steps of the same rows, γ 1 and γ 4
    first.note(40, 0.9)
    assert first.at(8, 8) == 0.45
    controller = BatchGamma(4, first, draft_per_token=0.05, bookkeeping=0.0)
    controller.accepted, controller.tested = {r: 0.2 for r in range(8)}, {r: 10.0 for r in range(8)}  # α 0.02
    assert controller.next_gamma(list(range(8))) == 0


# -- the law of every row, sampled --


def batched_draws(target, draft, prompts, settings, seeds, mutate=None, max_rows=None):
    """Seeded batches of `prompts` under the batched draft model, one per seed, each row's first two tokens counted;
    with `max_rows`, the requests beyond it join the batch as others finish."""
    counts = [Counter() for _ in prompts]
    for seed in seeds:
        s = Settings(**{**settings.__dict__, "seed": seed * len(prompts)})
        generators = [new_generator(target.device, s.seed + r) for r in range(len(prompts))]
        drafting = build_row_drafting("draft", s, generators, target, draft, concurrent=True)
        if mutate is not None:
            mutate(drafting)
        out = {r: [] for r in range(len(prompts))}
        queue = Admission([0.0] * len(prompts), max_rows or len(prompts))
        for row, event in generate_rows(target, prompts, s, drafting, generators, admission=queue):
            out[row].extend(event.tokens)
        for r, tokens in out.items():
            counts[r][tuple(tokens[:2])] += 1
    return counts


SAMPLED = Settings(max_new_tokens=3, gamma=2, temperature=1.0)


def row_p_values(small, mutate=None, runs=RUNS, refuse_below=None, every=250, max_rows=None):
    """Each row's p-value against its prompt's exact law over `runs` seeded batches; with `refuse_below`, stopped as
    soon as one row's falls below it (a broken engine's test needs no more)."""
    target, draft, prompt = small
    tok = target.tokenizer
    prompts = [prompt, tok.encode("b"), tok.encode("c a d")]
    laws = [exact_law(target, p, SAMPLED) for p in prompts]
    counts = [Counter() for _ in prompts]
    for start in range(0, runs, every if refuse_below is not None else runs):
        seeds = range(start, min(runs, start + (every if refuse_below is not None else runs)))
        for total, more in zip(counts, batched_draws(target, draft, prompts, SAMPLED, seeds, mutate, max_rows)):
            total.update(more)
        done = min(runs, seeds.stop)
        p_values = [chi_square_p(c, law, done) for c, law in zip(counts, laws)]
        if refuse_below is not None and min(p_values) < refuse_below:
            break
    return p_values


@pytest.mark.parametrize("max_rows", [None, 2], ids=["together", "joining"])
def test_every_row_of_a_sampled_batch_follows_the_targets_law(small, draws, max_rows):
    """`joining`: two rows at most, so the third request joins the batch when a row finishes."""
    assert min(row_p_values(small, max_rows=max_rows)) > 1e-3


@pytest.mark.parametrize("max_rows", [None, 2], ids=["together", "joining"])
def test_the_row_law_test_catches_rows_that_trade_their_draft_probabilities(small, draws, max_rows):
    """A batch bug: each row's tokens verified against the next row's q."""

    def trade(drafting):
        propose = drafting.propose

        def traded(tokens, gammas):
            made = propose(tokens, gammas)
            qs = [p.q if p else None for p in made]
            return [
                p if p is None or q is None or q.shape != p.q.shape else Proposal(p.candidates, q)
                for p, q in zip(made, qs[1:] + qs[:1])
            ]

        drafting.propose = traded

    assert min(row_p_values(small, trade, refuse_below=REFUSED, max_rows=max_rows)) < REFUSED


def test_plain_and_fixed_runs_keep_the_shared_forward_costs_fresh(target, tokenizer):
    """Adaptive γ avoids a width it believes dear, so it never measures it again; the runs that decode at that width
    anyway (plain decoding of a batch, a fixed γ) note what it really costs, in the table every run shares."""
    costs = ForwardCosts({3: 100.0})  # one slow measurement of a plain step of three rows
    prompts, settings = prompts_of(tokenizer, 3), Settings(max_new_tokens=6)
    for _ in generate_rows(target, prompts, settings, costs=costs):
        pass
    assert costs.seconds[3] < 100.0 * 0.7**3  # every plain step of the three rows pulled it back toward the truth
