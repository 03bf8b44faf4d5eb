"""The decode loop: plain decoding and speculative decoding, of one prompt or of several together, are the same
generator of StepEvents.

Plain decoding is the case with no drafter: every step proposes nothing and the target adds one token per row. With a
drafter, every step is: draft, verify every row in one target forward, roll back each row, emit. One prompt is the
batch of one, run by the same loop.
"""

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Protocol

import torch

from ..errors import InvalidRequest
from ..events import StepEvent
from ..models import LoadedModel
from ..settings import Settings
from .admission import Admission
from .batch_gamma import ForwardCosts
from .batch_rows import open_rows
from .gamma_policy import GammaPolicy, gamma_policy
from .sampling import probabilities, typical_distribution
from .step import Checked, Drafter, EachRow, FinishedStep, Judges, Proposal, RowDrafting
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
    admission: Admission | None = None,
    gamma_table: tuple = (),
) -> Iterator[tuple[int, StepEvent]]:
    """Several prompts decoded together, one target forward a step for all rows decoding: (row, its StepEvent) per
    step. Row r draws from its own generator (default: seed + r), so it follows the target's law and, greedy, writes
    what it writes alone. `costs` price adaptive γ; `admission`: when requests join; `gamma_table`: γ by batch size."""
    n = len(prompts)
    clock = make_clock(target.device)
    admission = admission or Admission.together(n)
    generators = generators or [new_generator(target.device, settings.seed + r) for r in range(n)]
    lm, limits = _open_rows(target, prompts, settings, drafting)
    policy = gamma_policy(settings, drafting, n, costs, gamma_table, target.forward_curve)
    rows: list[int] = []  # those decoding, in order
    tokens = [list(p) for p in prompts]  # each row's text so far
    index = [0] * n  # each row's steps so far
    prefill_s = [0.0] * n  # each row's prompt read, in seconds
    while not (stop is not None and stop.is_set()):
        # 0. Admit: requests that arrived join at this step boundary, their prompts read first (prefill).
        rows += _admit(admission.due(len(rows), stop), prompts, lm, drafting, policy.judges(), clock, prefill_s)
        if not rows:
            break
        t0 = clock()
        # 1. Draft: x_1..x_g ~ q (or candidates of up to g tokens) for every row. g is the set γ or, adaptive, the one
        #    with the most expected tokens per second (gamma_policy.py; 0 = a plain step), what the draft must first
        #    read of each row counted; it shrinks near a row's budget so no step overshoots.
        gamma, gammas, behind, proposals = _draft(policy, drafting, [tokens[r] for r in rows], rows, limits)
        trees = [p.tree() if p else EMPTY for p in proposals]
        t1 = clock()
        # 2. Verify: one target forward over every row's [root, every drafted node] gives p_1..p_{n+1}, each node's
        #    row conditioned on its row's prefix and its own ancestors. The rule keeps a path of drafts and adds the
        #    target's own next token: exactly what the target alone would produce (verify.py states each rule's math).
        logits = lm.verify([tokens[r][-1] for r in rows], trees)
        t2 = clock()  # the verify forward alone; what follows is the step's bookkeeping
        checked = check_rows(logits, trees, proposals, [generators[r] for r in rows], settings, explain)
        # 3. Roll back: each row's cache keeps its root and accepted path, as if only they had ever been fed; rows
        #    that finished leave the batch. Adaptive γ learns what held and what the step cost.
        events, staying = _roll_back(lm, drafting, checked, rows, tokens, index, limits, target.eos_ids)
        t3 = clock()
        widths = [1 + len(t.tokens) for t in trees]  # each row's root and nodes: the packed forward took them all
        seconds = dict(draft_s=t1 - t0, verify_s=t2 - t1)
        policy.learn(FinishedStep(rows, checked, gamma, sum(widths), **seconds, bookkeeping_s=t3 - t2))
        # 4. Emit: each row's accepted prefix plus the target's own token, cut at the first EOS.
        shared = dict(**seconds, step_s=clock() - t0, batch=len(rows), batch_tokens=sum(widths))
        for r, event, width, g, read in zip(rows, events, widths, gammas, behind):
            tokens[r].extend(event.tokens)
            first = prefill_s[r] * (index[r] == 0)
            yield r, replace(event, gamma=g, forward_tokens=width, prefill_s=first, draft_read=read * (g > 0), **shared)
            index[r] += 1
        rows = [rows[i] for i in staying]


def _draft(policy: GammaPolicy, drafting: RowDrafting | None, texts: list[list[int]], rows: list[int], limits):
    """Step 1 for the rows decoding (`texts` theirs): each one's γ, the policy told what the drafting must first read
    of each and how many tokens each may still write, cut so no step overshoots a row's budget; the proposals. Gives
    the batch's γ, each row's γ, what the drafting read of each, and the proposals."""
    left = [limits[r] - len(text) for r, text in zip(rows, texts)]
    behind = drafting.behind(texts) if drafting else [0] * len(rows)
    wanted = policy.next_gammas(rows, behind, left)
    gammas = [max(0, min(g, room - 1)) for g, room in zip(wanted, left)]
    return max(wanted), gammas, behind, drafting.propose(texts, gammas) if drafting else [None] * len(rows)


def _roll_back(lm, drafting: RowDrafting | None, checked: list[Checked], rows, tokens, index, limits, eos):
    """Step 3 for the rows decoding: each one's step as an event, the cache cut to each row's root and accepted path
    (the rows that finished dropped), the drafting told what held. Gives the events and, by place in the batch, the
    rows that stay."""
    events = [_event(index[r], c, eos, limits[r] - len(tokens[r])) for c, r in zip(checked, rows)]
    staying = [i for i, e in enumerate(events) if not e.finish]
    lm.keep([len(tokens[r]) for r in rows], [list(c.verdict.path) for c in checked], staying)
    if drafting is not None:
        drafting.observe([c.verdict if c.proposal else None for c in checked], staying)
    return events, staying


def _open_rows(target: LoadedModel, prompts: list[list[int]], settings: Settings, drafting: RowDrafting | None):
    """The target's cache for the prompts, and how long each row's text may grow: its prompt and max_new_tokens, or
    up to the context's end if that comes first. The cache has room for that and for the widest verify forward."""
    for prompt in prompts:
        target.check_readable(prompt)
    limits = [min(len(p) + settings.max_new_tokens, target.context_length) for p in prompts]
    widest = 1 + (drafting.max_nodes(settings.gamma) if drafting else 0)  # the most one verify forward adds a row
    reads = drafting.profile.hidden_layers if drafting else ()  # the target's hidden states the drafter reads
    if reads and len(prompts) > 1:
        raise InvalidRequest("a drafter that reads the target's hidden states does not decode a batch yet")
    return open_rows(target, max(limits) + widest, len(prompts), reads), limits


def _admit(joining: list[int], prompts, lm, drafting, judges: Judges | None, clock, prefill_s: list[float]):
    """The requests joining now into the batch; each one's prefill seconds noted in `prefill_s`."""
    if joining:
        read_s = _prefill(lm, [prompts[r] for r in joining], joining, drafting, judges, clock)
        prefill_s[:] = [read_s if r in joining else s for r, s in enumerate(prefill_s)]
    return joining


def _prefill(lm, prompts, rows: list[int], drafting: RowDrafting | None, judges: Judges | None, clock) -> float:
    """The rows' prompts into the target's cache, then their drafting started (lent adaptive γ's judges, if any);
    the seconds it took."""
    began = clock()
    lm.start(prompts, rows)
    if drafting is not None:
        drafting.start(prompts, lm.drafters_read, judges, rows)
    return clock() - began


def check_rows(logits, trees, proposals, generators, settings: Settings, explain: bool = False) -> list[Checked]:
    """Each row's verdict from its own logits, its own proposal and its own generator: rows of a batch never mix."""
    return [_check(x, t, prop, settings, g, explain) for x, t, prop, g in zip(logits, trees, proposals, generators)]


def _check(logits, tree: TokenTree, proposal: Proposal | None, settings: Settings, generator, explain: bool) -> Checked:
    """A row's verdict: the target's distributions after its root and nodes, and the rule's walk down its tree."""
    p = probabilities(logits, settings)
    q = proposal.q if proposal else None
    verdict = verify(p, tree, q, settings, generator, typical_distribution(logits, settings))
    return Checked(proposal, tree, verdict, step_detail(p, tree, verdict, q, settings) if explain else None)


def _event(index: int, step: Checked, eos, room: int) -> StepEvent:
    """The step as everyone sees it: the shown candidate's tokens, how many held, and the target's own token; cut at
    the first accepted EOS, and marked as the last where it ends the run (EOS, or `room` tokens filled)."""
    proposal = step.proposal
    tree = step.tree
    verdict = step.verdict
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
