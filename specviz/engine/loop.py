"""The decode loop: plain decoding and speculative decoding, of one prompt or of several together, are the same
generator of StepEvents.

Plain decoding is the case with no drafter: every step proposes nothing and the target adds one token per row. With a
drafter, every step is: draft, verify every row in one target forward, roll back each row, emit. One prompt is the
batch of one, run by the same loop.
"""

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Protocol

import torch

from ..errors import InvalidRequest
from ..events import StepDetail, StepEvent
from ..models import LoadedModel
from ..settings import Settings
from .adaptive import GammaController
from .batch_gamma import BatchGamma, ForwardCosts
from .batch_rows import open_rows
from .sampling import probabilities, typical_distribution
from .step import Drafter, EachRow, Judges, Proposal, RowDrafting, Verdict
from .step_detail import step_detail
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
    """One prompt: the batch of one. Yield one StepEvent per target forward until EOS, the token budget, or a stop
    request. `explain`: record each step's detail for the screen (how the rule decided, the leading tokens); a
    benchmark does without."""
    drafting = None if drafter is None else EachRow([drafter])
    generators = None if generator is None else [generator]
    for _, event in generate_rows(target, [prompt_ids], settings, drafting, generators, stop, explain):
        yield event


def generate_rows(
    target: LoadedModel,
    prompts: list[list[int]],
    settings: Settings,
    drafting: RowDrafting | None = None,
    generators: list[torch.Generator] | None = None,
    stop: StopFlag | None = None,
    explain: bool = True,
    costs: ForwardCosts | None = None,
) -> Iterator[tuple[int, StepEvent]]:
    """Several prompts decoded together: every step is one target forward for all rows still decoding, and each row
    accepts, rolls back and finishes on its own. Yield (row, its StepEvent) as each step ends. Row r draws from its
    own generator (default: seeded with the settings' seed + r), so each row follows the target's law; under greedy
    settings each row writes what it writes decoded alone. `costs`: the forward costs measured so far on this model
    (kept by the caller across runs), which adaptive γ prices a batch's step with."""
    for prompt in prompts:
        target.check_readable(prompt)
    clock, rows = make_clock(target.device), list(range(len(prompts)))
    if generators is None:
        generators = [new_generator(target.device, settings.seed + r) for r in rows]
    budgets = [min(settings.max_new_tokens, target.context_length - len(p)) for p in prompts]
    widest = 1 + (drafting.max_nodes(settings.gamma) if drafting else 0)  # the most one verify forward adds a row
    reads = drafting.profile.hidden_layers if drafting else ()  # the target's hidden states the drafter reads
    if reads and len(prompts) > 1:
        raise InvalidRequest("a drafter that reads the target's hidden states does not decode a batch yet")
    lm = open_rows(target.model, max(len(p) + b for p, b in zip(prompts, budgets)) + widest, len(prompts), reads)

    began = clock()
    lm.start(prompts)
    controller = _controller(settings, drafting, len(prompts), costs)
    if drafting is not None:
        drafting.start(prompts, lm.drafters_read, _judges(controller, drafting))
    prefill_s = clock() - began

    tokens, produced, index = [list(p) for p in prompts], [0] * len(rows), [0] * len(rows)
    while rows and not (stop is not None and stop.is_set()):
        t0 = clock()
        # 1. Draft: x_1..x_g ~ q (or candidates of up to g tokens) for every row. g is the set γ or, adaptive, the one
        #    with the most expected tokens per second for the whole batch (adaptive.py; 0 = a plain step); it shrinks
        #    near a row's budget so no step overshoots.
        wanted = _gammas(controller, settings, drafting, rows)
        gamma, gammas = max(wanted), [max(0, min(g, budgets[r] - produced[r] - 1)) for g, r in zip(wanted, rows)]
        proposals = drafting.propose([tokens[r] for r in rows], gammas) if drafting else [None] * len(rows)
        trees = [p.tree() if p else EMPTY for p in proposals]
        t1 = clock()
        # 2. Verify: one target forward over every row's [root, every drafted node] gives p_1..p_{n+1}, each node's
        #    row conditioned on its row's prefix and its own ancestors. The rule keeps a path of drafts and adds the
        #    target's own next token: exactly what the target alone would produce (verify.py states each rule's math).
        logits = lm.verify([tokens[r][-1] for r in rows], trees)
        t2 = clock()  # the verify forward alone; what follows is the step's bookkeeping
        checked = check_rows(logits, trees, proposals, [generators[r] for r in rows], settings, explain)
        # 3. Roll back: each row's cache keeps its root and accepted path, as if only they had ever been fed; rows
        #    that finished leave the batch.
        events = [_event(index[r], c, target.eos_ids, budgets[r] - produced[r]) for c, r in zip(checked, rows)]
        staying = [i for i, e in enumerate(events) if not e.finish]
        lm.keep([len(tokens[r]) for r in rows], [list(c.verdict.path) for c in checked], staying)
        if drafting is not None:
            drafting.observe([c.verdict if c.proposal else None for c in checked], staying)
        t3 = clock()
        batch, batch_tokens = len(rows), sum(1 + len(t.tokens) for t in trees)
        if controller is not None:  # what the forward computed: every row padded to the widest row's positions
            seconds = dict(draft_s=t1 - t0, verify_s=t2 - t1, bookkeeping_s=t3 - t2)
            _tell(controller, rows, checked, gamma, batch * max(1 + len(t.tokens) for t in trees), **seconds)
        # 4. Emit: each row's accepted prefix plus the target's own token, cut at the first EOS.
        step_s = clock() - t0
        for r, event, tree, g in zip(rows, events, trees, gammas):
            tokens[r].extend(event.tokens)
            produced[r] += len(event.tokens)
            timing = dict(
                draft_s=t1 - t0, verify_s=t2 - t1, step_s=step_s, prefill_s=prefill_s if index[r] == 0 else 0.0
            )
            shape = dict(gamma=g, forward_tokens=1 + len(tree.tokens), batch=batch, batch_tokens=batch_tokens)
            yield r, replace(event, **shape, **timing)
            index[r] += 1
        rows = [rows[i] for i in staying]


def check_rows(logits, trees, proposals, generators, settings: Settings, explain: bool = False) -> list[Checked]:
    """Each row's verdict from its own logits, its own proposal and its own generator: rows of a batch never mix."""
    return [_check(x, t, prop, settings, g, explain) for x, t, prop, g in zip(logits, trees, proposals, generators)]


def _check(logits, tree: TokenTree, proposal: Proposal | None, settings: Settings, generator, explain: bool) -> Checked:
    """A row's verdict: the target's distributions after its root and nodes, and the rule's walk down its tree."""
    p = probabilities(logits, settings)
    q = proposal.q if proposal else None
    verdict = verify(p, tree, q, settings, generator, typical_distribution(logits, settings))
    return Checked(proposal, tree, verdict, step_detail(p, tree, verdict, q, settings) if explain else None)


def _gammas(controller, settings: Settings, drafting: RowDrafting | None, rows: list[int]) -> list[int]:
    """Each row's γ this step: none without a drafter, the set γ, or what adaptive chose (under load, per row)."""
    if drafting is None:
        return [0] * len(rows)
    if isinstance(controller, BatchGamma):
        return controller.next_gammas(rows)
    return [controller.next_gamma(rows) if controller else settings.gamma] * len(rows)


def _controller(settings: Settings, drafting: RowDrafting | None, rows: int, costs: ForwardCosts | None):
    """Adaptive γ's controller for the drafter its profile describes (for a batch: γ priced by the whole batch's step);
    None under a fixed γ or plain decoding."""
    if not settings.adaptive or drafting is None:
        return None
    if rows > 1 or costs is not None:  # a sweep's batch of one is priced like its batches, by the costs it measured
        return BatchGamma.for_drafter(settings.gamma, drafting.profile, costs or ForwardCosts(), rows)
    return GammaController.for_drafter(settings.gamma, drafting.profile)


def _judges(controller, drafting: RowDrafting) -> Judges | None:
    """What the controller lends a drafter of a single row that sizes its own draft (stops_early) or tree while
    drafting; in a batch γ is the batch's."""
    if not isinstance(controller, GammaController):
        return None
    return Judges(controller.tree_size, controller.keep_drafting if drafting.profile.stops_early else None)


def _tell(controller, rows: list[int], steps: list[Checked], gamma: int, batch_tokens: int, **seconds: float) -> None:
    """What adaptive γ learns from a finished step: the depth drafted, the forward's width, what held, the costs."""
    shown = [s.tree.paths[s.verdict.winner] if s.tree.paths else () for s in steps]
    if isinstance(controller, BatchGamma):
        held = [
            (r, len(s.tree.tokens), s.verdict.accepted, s.verdict.accepted < len(w))
            for r, s, w in zip(rows, steps, shown)
        ]
        return controller.observe(gamma, held, batch_tokens, **seconds)
    (step,), (path,) = steps, shown
    proposal, tree, verdict = step.proposal, step.tree, step.verdict
    controller.observe(
        gamma=max(map(len, proposal.candidates)) if proposal else gamma,
        forward_tokens=1 + len(tree.tokens),
        accepted=verdict.accepted,
        rejected=verdict.accepted < len(path),
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
