"""The decode loop: plain decoding and speculative decoding are the same generator of StepEvents.

Plain decoding is the case with no drafter: every step proposes nothing and the target adds one
token. With a drafter, every step is: draft, verify in one target forward, roll back, emit.
"""

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Protocol

import torch

from ..events import StepEvent
from ..models import LoadedModel
from ..settings import Settings
from .adaptive import GammaController
from .explain import step_detail
from .sampling import probabilities, typical_distribution
from .static_lm import open_lm
from .step import Drafter, Verdict
from .tree import EMPTY
from .verify import verify


class StopFlag(Protocol):
    def is_set(self) -> bool: ...


def make_clock(device: torch.device):
    """perf_counter that first waits for queued GPU work, so a phase's time is really its own."""
    if device.type == "cuda":

        def clock() -> float:
            torch.cuda.synchronize(device)
            return time.perf_counter()

        return clock
    return time.perf_counter


def new_generator(device: torch.device, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def hidden_layers(drafter: Drafter | None) -> tuple[int, ...]:
    """Which of the target's hidden states the drafter reads (none, or e.g. (-1,): the final one)."""
    if drafter is None or not drafter.reads_hidden:
        return ()
    return tuple(getattr(drafter, "hidden_layers", (-1,)))


def generate(
    target: LoadedModel,
    prompt_ids: list[int],
    settings: Settings,
    drafter: Drafter | None = None,
    generator: torch.Generator | None = None,
    stop: StopFlag | None = None,
) -> Iterator[StepEvent]:
    """Yield one StepEvent per target forward until EOS, the token budget, or a stop request."""
    target.check_readable(prompt_ids)
    clock = make_clock(target.device)
    generator = generator or new_generator(target.device, settings.seed)
    budget = min(settings.max_new_tokens, target.context_length - len(prompt_ids))
    widest = 1 + (drafter.max_nodes(settings.gamma) if drafter else 0)  # the most one verify forward adds
    lm = open_lm(target.model, len(prompt_ids) + budget + widest, keep_hidden=hidden_layers(drafter))

    began = clock()
    if len(prompt_ids) > 1:  # the cache holds every token but the last, which each step feeds
        lm.extend(torch.tensor(prompt_ids[:-1]), last_only=True)
    if drafter is not None:
        drafter.start(prompt_ids, lm)
    prefill_s = clock() - began

    tokens, produced, index = list(prompt_ids), 0, 0
    controller = GammaController(settings.gamma) if settings.adaptive and drafter is not None else None
    if controller is not None and getattr(drafter, "stops_early", False):  # the draft length is decided while drafting
        controller.stops_early, drafter.keep_drafting = True, controller.keep_drafting
    if controller is not None and hasattr(drafter, "tree_size"):  # a tree drafter keeps only the nodes that pay
        drafter.tree_size = controller.tree_size
    while produced < budget and not (stop is not None and stop.is_set()):
        t0 = clock()
        # 1. Draft: x_1..x_g ~ q (or candidates of up to g tokens). g is the set γ or, adaptive, the one with the most
        #    expected tokens per second (adaptive.py; 0 = a plain step; a draft model may stop sooner, where its own
        #    probabilities say the next token would not pay); it shrinks near the budget so no step overshoots.
        gamma = 0 if drafter is None else controller.next_gamma() if controller else settings.gamma
        gamma = max(0, min(gamma, budget - produced - 1))
        proposal = drafter.propose(tokens, gamma) if gamma > 0 else None  # None: a plain step
        tree = proposal.tree() if proposal else EMPTY
        t1 = clock()
        # 2. Verify: one target forward over [last token, every drafted node] gives p_1..p_{n+1}, each node's row
        #    conditioned on the prefix and its own ancestors. The rule keeps a path of drafts and adds the target's own
        #    next token: exactly what the target alone would produce (verify.py states each rule's math).
        logits = lm.extend_tree(tokens[-1], tree)
        p = probabilities(logits, settings)
        verdict = verify(
            p, tree, proposal.q if proposal else None, settings, generator, typical_distribution(logits, settings)
        )
        detail = step_detail(p, tree, verdict, proposal.q if proposal else None, settings)  # for the screen
        # 3. Roll back: the cache keeps the last token and the accepted path, as if only they had ever been fed.
        lm.keep(len(tokens), list(verdict.path))
        if proposal is not None:
            drafter.observe(verdict)
        t2 = clock()
        shown = tree.paths[verdict.winner] if tree.paths else ()
        if controller is not None:
            depth = max(map(len, proposal.candidates)) if proposal else gamma
            controller.observe(
                depth,
                1 + len(tree.tokens),
                verdict.accepted,
                verdict.accepted < len(shown),
                t1 - t0,
                t2 - t1,
                proposal.confidence if proposal else None,
                proposal.first_held(tree, verdict) if proposal else 0,
            )
        # 4. Emit: the accepted prefix plus the target's own token, cut at the first EOS.
        event = _event(index, tree, verdict, detail, target.eos_ids, budget - produced, proposal)
        tokens.extend(event.tokens)
        produced += len(event.tokens)
        yield replace(
            event,
            draft_s=t1 - t0,
            verify_s=t2 - t1,
            step_s=clock() - t0,
            gamma=gamma,
            forward_tokens=1 + len(tree.tokens),
            prefill_s=prefill_s if index == 0 else 0.0,
        )
        if event.finish:
            return
        index += 1


def _event(index, tree, verdict: Verdict, detail, eos, room, proposal) -> StepEvent:
    """The step as everyone sees it: the winning candidate's tokens, how many held, and the target's token."""
    proposed = list(tree.candidate(verdict.winner)) if tree.paths else []
    accepted, next_token, p, q = verdict.accepted, verdict.next_token, verdict.p, verdict.q
    finish = None
    hit = next((i for i, t in enumerate(proposed[:accepted]) if t in eos), None)
    if hit is not None:  # an accepted draft token was EOS: the run ends there; nothing after it was ever tested
        proposed, accepted, next_token, finish = proposed[: hit + 1], hit + 1, None, "eos"
        p, q = p[: hit + 1], None if q is None else q[: hit + 1]
        detail = replace(
            detail, trials=tuple(t for t in detail.trials if t.depth <= hit + 1), leading=detail.leading[: hit + 1]
        )
    elif next_token in eos:
        finish = "eos"
    kind = (
        "plain"
        if not proposed
        else "end"
        if next_token is None
        else "bonus"
        if accepted == len(proposed)
        else "correction"
    )
    if finish is None and accepted + (next_token is not None) >= room:
        finish = "length"
    candidates = tree.candidates if len(tree.paths) > 1 else None
    return StepEvent(
        index=index,
        proposed=tuple(proposed),
        accepted=accepted,
        next_token=next_token,
        next_kind=kind,
        p=tuple(p),
        q=None if q is None else tuple(q),
        draft_s=0.0,
        verify_s=0.0,
        step_s=0.0,
        draft_forwards=proposal.forwards if proposal else 0,
        finish=finish,
        candidates=candidates,
        winner=verdict.winner if candidates else None,
        detail=detail,
        draft_tokens=proposal.spelled if proposal else None,
        origin=proposal.origin if proposal else None,
    )
