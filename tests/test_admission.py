"""Continuous batching: requests join a running batch at a step boundary once their prompt is read, and leave when
they finish, at most `max_rows` at once, the rest waiting in arrival order. Every request still writes what its
prompt writes alone (bit for bit in exact mode); the queue itself is checked on a clock the test moves."""

import math

import pytest
import torch
from tiny import loaded, perturbed, tiny_llama

from specviz.drafters.registry import build_row_drafting
from specviz.engine import generate, new_generator
from specviz.engine.admission import Admission
from specviz.engine.loop import generate_rows
from specviz.errors import InvalidRequest
from specviz.events import generated_ids
from specviz.models.exact import set_exact
from specviz.settings import Settings


class Clock:
    """A clock that moves `tick` seconds each time it is read, and as far as asked when slept on."""

    def __init__(self, tick: float = 0.001):
        self.t, self.tick, self.slept = 0.0, tick, 0.0

    def __call__(self) -> float:
        self.t += self.tick
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds
        self.slept += seconds


def prompts_of(tokenizer, n=5):
    return [tokenizer.encode(" ".join(f"w{(3 * i + j % (2 + i)) % 30}" for j in range(2 + 3 * i))) for i in range(n)]


def served(target, prompts, settings, admission, drafter="none", draft=None):
    """Each request's tokens, and every event as (request, batch size) in the order they came."""
    generators = [new_generator(target.device, settings.seed + r) for r in range(len(prompts))]
    drafting = build_row_drafting(drafter, settings, generators, target, draft, concurrent=True)
    out, seen = {r: [] for r in range(len(prompts))}, []
    for row, event in generate_rows(target, prompts, settings, drafting, generators, admission=admission):
        out[row].extend(event.tokens)
        seen.append((row, event.batch))
    return [out[r] for r in range(len(prompts))], seen


def alone(target, prompt, settings):
    return generated_ids(generate(target, prompt, settings))


def joined_mid_run(seen) -> bool:
    """Whether some request's first step came after another's last: it joined a batch that was already decoding."""
    first = {r: seen.index(next(s for s in seen if s[0] == r)) for r, _ in seen}
    last = {r: max(i for i, s in enumerate(seen) if s[0] == r) for r, _ in seen}
    return any(first[b] > first[a] and first[b] <= last[a] for a in first for b in first if a != b)


@pytest.mark.parametrize("drafter", ["none", "draft", "ngram", "suffix"])
def test_requests_that_join_a_running_batch_write_what_they_write_alone(target, drafts, tokenizer, drafter):
    """Two rows at most: as each request finishes, the next in the queue joins the row still decoding."""
    prompts, settings = prompts_of(tokenizer), Settings(max_new_tokens=12, gamma=3)
    rows, seen = served(target, prompts, settings, Admission([0.0] * 5, max_rows=2), drafter, drafts["partial"])
    assert rows == [alone(target, p, settings) for p in prompts]
    assert max(b for _, b in seen) == 2 and joined_mid_run(seen)


def test_joining_requests_in_bfloat16_write_their_prompts_tokens_bit_for_bit_in_exact_mode(tokenizer):
    """Joining pads the rows already decoding at the left: in exact mode no row's numbers may move for it."""
    target = loaded(tiny_llama(len(tokenizer), seed=1).to(torch.bfloat16), tokenizer, "tiny-bf16")
    draft = loaded(perturbed(tiny_llama(len(tokenizer), seed=1), seed=3, scale=0.3).to(torch.bfloat16), tokenizer)
    assert set_exact(target.model, True) == ""
    prompts, settings = prompts_of(tokenizer)[::-1], Settings(max_new_tokens=10, gamma=4)  # longest prompts first
    for drafter in ("none", "draft"):
        rows, seen = served(target, prompts, settings, Admission([0.0] * 5, max_rows=3), drafter, draft)
        assert rows == [alone(target, p, settings) for p in prompts], drafter
        assert joined_mid_run(seen)


def test_adaptive_gamma_over_a_batch_that_rows_join_keeps_every_row_as_alone(target, drafts, tokenizer):
    prompts, settings = prompts_of(tokenizer), Settings(max_new_tokens=12, gamma=4, adaptive=True)
    rows, seen = served(target, prompts, settings, Admission([0.0] * 5, max_rows=2), "draft", drafts["partial"])
    assert rows == [alone(target, p, settings) for p in prompts] and joined_mid_run(seen)


def test_requests_join_when_they_arrive_and_the_loop_waits_when_none_is_decoding(target, tokenizer):
    """On a clock the test moves: the second request arrives while the first decodes and joins at the next step
    boundary; the third arrives long after both finished, and the idle loop sleeps until then."""
    prompts, settings = prompts_of(tokenizer, 3), Settings(max_new_tokens=8, gamma=2)
    clock = Clock()
    admission = Admission([0.0, 0.004, 50.0], max_rows=4, clock=clock, sleep=clock.sleep)
    rows, seen = served(target, prompts, settings, admission, "ngram")
    assert rows == [alone(target, p, settings) for p in prompts]
    assert admission.admitted[0] < admission.admitted[1] < 50.0 <= admission.admitted[2] < 50.1
    assert admission.admitted[1] >= 0.004 and clock.slept > 40
    assert joined_mid_run(seen[: -sum(1 for r, _ in seen if r == 2)])  # 1 joined 0; 2 decoded alone
    assert all(b == 1 for r, b in seen if r == 2)


def test_the_queue_lets_in_arrived_requests_in_arrival_order_up_to_the_free_rows():
    clock = Clock(tick=0.0)
    admission = Admission([0.3, 0.1, 0.2, 5.0], max_rows=2, clock=clock, sleep=clock.sleep)
    admission.begin()
    clock.t = 0.25
    assert admission.due(decoding=0) == [1, 2]  # arrived by 0.25, two rows free
    clock.t = 0.4
    assert admission.due(decoding=2) == []  # arrived, but no row free
    assert admission.due(decoding=1) == [0]
    assert admission.due(decoding=0) == [3] and clock.t == pytest.approx(5.0)  # idle: it waited for the arrival
    assert admission.due(decoding=0) == []  # everyone has joined
    assert admission.admitted == {1: 0.25, 2: 0.25, 0: 0.4, 3: pytest.approx(5.0)}


def test_a_stop_while_the_loop_waits_for_an_arrival_ends_the_wait():
    class Stop:
        def is_set(self):
            return clock.t > 1.0

    clock = Clock(tick=0.0)
    admission = Admission([100.0], max_rows=1, clock=clock, sleep=clock.sleep)
    assert admission.due(decoding=0, stop=Stop()) == [] and clock.t < 2.0


@pytest.mark.parametrize(
    "arrivals, max_rows, said",
    [([0.0], 0, "at least one"), ([-1.0], 1, "0 seconds or later"), ([math.nan], 1, "0 seconds or later")],
)
def test_a_queue_that_cannot_be_served_is_refused_in_one_line(arrivals, max_rows, said):
    with pytest.raises(InvalidRequest, match=said) as refused:
        Admission(arrivals, max_rows)
    assert "\n" not in str(refused.value)


def test_all_at_once_is_the_static_batch(target, drafts, tokenizer):
    """Admission.together: every request read before the first step, and the batch only shrinks from there."""
    prompts, settings = prompts_of(tokenizer, 4), Settings(max_new_tokens=10, gamma=3)
    rows, seen = served(target, prompts, settings, Admission.together(4), "draft", drafts["partial"])
    sizes = [b for _, b in seen]
    assert sizes[0] == 4 and sizes == sorted(sizes, reverse=True)
    assert rows == [alone(target, p, settings) for p in prompts]
