"""The decode loop: plain decoding and speculative decoding are the same generator of StepEvents.

Plain decoding is the case with no drafter: every step proposes nothing and the target adds one
token. With a drafter, every step is: draft, verify in one target forward, roll back, emit.
"""

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Protocol

import torch

from ..events import StepDetail, StepEvent
from ..models import LoadedModel
from ..settings import Settings
from .adaptive import GammaController
from .explain import step_detail
from .sampling import probabilities, typical_distribution
from .static_lm import open_lm
from .step import Drafter, Judges, Proposal, Verdict
from .tree import EMPTY, TokenTree
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


# Positions and counts, the same in the engine and every drafter:
#   tokens     the committed text, prompt then output; token i sits at position i.
#   the cache  holds tokens[:-1]. The last committed token, the root, is fed by the next verify forward, at
#              position len(tokens) - 1; rollback keeps the root and the accepted path (lm.keep).
#   depth d    a draft token d places after the root, at position len(tokens) - 1 + d (tree.draft_position).
#              Row 0 of the verify forward follows the root, row 1 + i follows tree node i (tree.row_after).
#   accepted   how many draft tokens of the shown candidate the target kept: 0 .. its length.


@dataclass(frozen=True)
class Checked:
    """One step's draft and what the target's verification made of it."""

    proposal: Proposal | None  # None: a plain step
    tree: TokenTree
    verdict: Verdict
    detail: StepDetail | None  # for the screen


def generate(
    target: LoadedModel,
    prompt_ids: list[int],
    settings: Settings,
    drafter: Drafter | None = None,
    generator: torch.Generator | None = None,
    stop: StopFlag | None = None,
    explain: bool = True,
) -> Iterator[StepEvent]:
    """Yield one StepEvent per target forward until EOS, the token budget, or a stop request. `explain`: record
    each step's detail for the screen (how the rule decided, the leading tokens); a benchmark does without."""
    target.check_readable(prompt_ids)
    clock = make_clock(target.device)
    generator = generator or new_generator(target.device, settings.seed)
    budget = min(settings.max_new_tokens, target.context_length - len(prompt_ids))
    widest = 1 + (drafter.max_nodes(settings.gamma) if drafter else 0)  # the most one verify forward adds
    reads = drafter.profile.hidden_layers if drafter else ()  # the target's hidden states the drafter reads
    lm = open_lm(target.model, len(prompt_ids) + budget + widest, keep_hidden=reads)

    began = clock()
    if len(prompt_ids) > 1:  # the cache holds every token but the last, which each step feeds
        lm.extend(torch.tensor(prompt_ids[:-1]), last_only=True)
    controller = _controller(settings, drafter)
    if drafter is not None:
        drafter.start(prompt_ids, lm, _judges(controller, drafter))
    prefill_s = clock() - began

    tokens, produced, index = list(prompt_ids), 0, 0
    while produced < budget and not (stop is not None and stop.is_set()):
        t0 = clock()
        # 1. Draft: x_1..x_g ~ q (or candidates of up to g tokens). g is the set γ or, adaptive, the one with the most
        #    expected tokens per second (adaptive.py; 0 = a plain step; a draft model may stop sooner, where its own
        #    probabilities say the next token would not pay); it shrinks near the budget so no step overshoots.
        gamma = 0 if drafter is None else controller.next_gamma() if controller else settings.gamma
        gamma = max(0, min(gamma, budget - produced - 1))
        proposal = drafter.propose(tokens, gamma) if gamma > 0 else None  # None: a plain step
        tree, q = (proposal.tree(), proposal.q) if proposal else (EMPTY, None)
        t1 = clock()
        # 2. Verify: one target forward over [root, every drafted node] gives p_1..p_{n+1}, each node's row
        #    conditioned on the prefix and its own ancestors. The rule keeps a path of drafts and adds the target's own
        #    next token: exactly what the target alone would produce (verify.py states each rule's math).
        logits = lm.extend_tree(tokens[-1], tree)
        t2 = clock()  # the verify forward alone; what follows is the step's bookkeeping
        p = probabilities(logits, settings)
        verdict = verify(p, tree, q, settings, generator, typical_distribution(logits, settings))
        checked = Checked(proposal, tree, verdict, step_detail(p, tree, verdict, q, settings) if explain else None)
        # 3. Roll back: the cache keeps the root and the accepted path, as if only they had ever been fed.
        lm.keep(len(tokens), list(verdict.path))
        if proposal is not None:
            drafter.observe(verdict)
        t3 = clock()
        if controller is not None:
            _tell(controller, checked, gamma, draft_s=t1 - t0, verify_s=t2 - t1, bookkeeping_s=t3 - t2)
        # 4. Emit: the accepted prefix plus the target's own token, cut at the first EOS.
        event = _event(index, checked, eos=target.eos_ids, room=budget - produced)
        tokens.extend(event.tokens)
        produced += len(event.tokens)
        timing = dict(
            draft_s=t1 - t0, verify_s=t2 - t1, step_s=clock() - t0, prefill_s=prefill_s if index == 0 else 0.0
        )
        yield replace(event, gamma=gamma, forward_tokens=1 + len(tree.tokens), **timing)
        if event.finish:
            return
        index += 1


def _controller(settings: Settings, drafter: Drafter | None) -> GammaController | None:
    """Adaptive γ's controller for the drafter its profile describes; None under a fixed γ or plain decoding."""
    if not settings.adaptive or drafter is None:
        return None
    return GammaController.for_drafter(settings.gamma, drafter.profile)


def _judges(controller: GammaController | None, drafter: Drafter) -> Judges | None:
    """What the controller lends a drafter that sizes its own draft (stops_early) or tree while drafting."""
    if controller is None:
        return None
    return Judges(controller.tree_size, controller.keep_drafting if drafter.profile.stops_early else None)


def _tell(controller: GammaController, step: Checked, gamma: int, **seconds: float) -> None:
    """What adaptive γ learns from a finished step: the depth drafted, the forward's width, what held, the costs."""
    proposal, tree, verdict = step.proposal, step.tree, step.verdict
    shown = tree.paths[verdict.winner] if tree.paths else ()
    controller.observe(
        gamma=max(map(len, proposal.candidates)) if proposal else gamma,
        forward_tokens=1 + len(tree.tokens),
        accepted=verdict.accepted,
        rejected=verdict.accepted < len(shown),
        **seconds,
        confidences=proposal.confidence if proposal else None,
        held=proposal.first_held(tree, verdict) if proposal else 0,
    )


def _event(index: int, step: Checked, eos, room: int) -> StepEvent:
    """The step as everyone sees it: the shown candidate's tokens, how many held, and the target's own token; cut at
    the first accepted EOS, and marked as the last where it ends the run (EOS, or `room` tokens filled)."""
    proposal, tree, verdict = step.proposal, step.tree, step.verdict
    proposed = tree.candidate(verdict.winner) if tree.paths else ()
    kind = "plain" if not proposed else "bonus" if verdict.accepted == len(proposed) else "correction"
    candidates = tree.candidates if len(tree.paths) > 1 else None
    added = (*proposed[: verdict.accepted], verdict.next_token)
    ended = next((i for i, t in enumerate(added) if t in eos), None)
    finish = "eos" if ended is not None else "length" if len(added) >= room else None
    event = StepEvent(
        index=index,
        proposed=proposed,
        accepted=verdict.accepted,
        next_token=verdict.next_token,
        next_kind=kind,
        p=verdict.p,
        q=verdict.q,
        draft_s=0.0,
        verify_s=0.0,
        step_s=0.0,
        draft_forwards=proposal.forwards if proposal else 0,
        candidates=candidates,
        winner=verdict.winner if candidates else None,
        detail=step.detail,
        draft_tokens=proposal.source.spelled if proposal else None,
        origin=proposal.origin_of(verdict.winner) if proposal else None,
        block=proposal.source.block if proposal else 0,
        finish=finish,
    )
    if ended is not None and ended < verdict.accepted:  # an accepted draft token was EOS: the run ends there
        return event.ended_by_draft(ended + 1)
    return event
