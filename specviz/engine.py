"""The decode loop: plain decoding and speculative decoding are the same generator of StepEvents.

Plain decoding is the case with no drafter: every step proposes nothing and the target adds one
token. With a drafter, every step is: draft, verify in one target forward, roll back, emit.
"""

import time
from dataclasses import replace
from typing import Iterator, Optional, Protocol

import torch

from .adaptive import GammaController
from .cached_lm import CachedLM
from .drafters import Drafter
from .events import StepEvent
from .models import LoadedModel
from .sampling import choose, probabilities
from .settings import MAX_CANDIDATES, MAX_TREE_PATHS, Settings
from .static_lm import open_lm
from .tree import build_tree
from .tree_verify import token_probs, verify_tree_greedy, verify_tree_sampled, verify_tree_typical
from .verify import Verdict, verify_greedy, verify_sampled


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


def generate(
    target: LoadedModel,
    prompt_ids: list[int],
    settings: Settings,
    drafter: Optional[Drafter] = None,
    generator: Optional[torch.Generator] = None,
    stop: Optional[StopFlag] = None,
) -> Iterator[StepEvent]:
    """Yield one StepEvent per target forward until EOS, the token budget, or a stop request."""
    clock = make_clock(target.device)
    generator = generator or new_generator(target.device, settings.seed)
    attach = getattr(drafter, "attach", None)  # drafters that read the target's hidden state (Medusa)
    budget = min(settings.max_new_tokens, target.context_length - len(prompt_ids))
    widest = 1 + settings.gamma * max(MAX_CANDIDATES, MAX_TREE_PATHS)  # the most one verify forward can add
    lm = open_lm(target.model, len(prompt_ids) + budget + widest, keep_hidden=attach is not None)
    if attach is not None:
        attach(lm)
    eos = target.eos_ids

    began = clock()
    if len(prompt_ids) > 1:  # the cache holds every token but the last, which each step feeds
        lm.extend(torch.tensor(prompt_ids[:-1]), last_only=True)
    if drafter is not None:
        drafter.start(prompt_ids)
    prefill_s = clock() - began

    tokens, produced, index = list(prompt_ids), 0, 0
    controller = GammaController(settings.gamma) if settings.adaptive and drafter is not None else None
    while produced < budget and not (stop is not None and stop.is_set()):
        t0 = clock()
        # 1. Draft: x_1..x_g ~ q. g is the set γ or, adaptive, the one with the most expected tokens per second
        #    (adaptive.py; 0 = a plain step); it shrinks near the budget so a step never overshoots it.
        gamma = 0 if drafter is None else controller.next_gamma() if controller else settings.gamma
        gamma = max(0, min(gamma, budget - produced - 1))
        proposal = drafter.propose(tokens, gamma) if gamma > 0 else None  # None: nothing to propose, a plain step
        draft = proposal.tokens if proposal else torch.empty(0, dtype=torch.long, device=target.device)
        t1 = clock()
        tree_step = None
        if proposal is not None and proposal.q is None:
            # 2-3 for a deterministic drafter: verify its candidates as a token tree, compact the cache.
            draft, verdict, tree_step, fed = verify_as_tree(lm, tokens, proposal, settings, generator)
        else:
            # 2. Verify: one target forward over [last token, x_1..x_g] gives p_1..p_{g+1}.
            feed = torch.cat([torch.tensor(tokens[-1:], device=target.device), draft])
            fed = len(feed)
            p = probabilities(lm.extend(feed), settings)
            if proposal is None:
                verdict = Verdict(0, int(choose(p, settings, generator)[0]), [], None)
            elif settings.greedy:
                verdict = verify_greedy(p, draft, proposal.q)
            else:
                verdict = verify_sampled(p, proposal.q, draft, generator)
            # 3. Roll back: keep the cache of the last token and the accepted drafts.
            lm.truncate(len(tokens) + verdict.accepted)
            draft = draft.tolist()
        if proposal is not None:
            drafter.observe(verdict.accepted)
        t2 = clock()
        if controller is not None:
            controller.observe(gamma, fed, verdict.accepted, verdict.accepted < len(draft), t1 - t0, t2 - t1)
        # 4. Emit: the accepted prefix plus the target's own token, cut at the first EOS.
        event = _event(index, draft, verdict, eos, produced, budget, proposal)
        if tree_step is not None:
            event = replace(event, candidates=tree_step[0], winner=tree_step[1])
        tokens.extend(event.tokens)
        produced += len(event.tokens)
        yield replace(event, draft_s=t1 - t0, verify_s=t2 - t1, step_s=clock() - t0, gamma=gamma, forward_tokens=fed,
                      prefill_s=prefill_s if index == 0 else 0.0)
        if event.finish:
            return
        index += 1


def verify_as_tree(lm: CachedLM, tokens: list[int], proposal, settings: Settings, generator):
    """One forward over the candidates' trie; keep only the accepted path in the cache.
    Returns (the winning candidate's tokens, its Verdict, (all candidates, winner) or None for a single chain,
    the number of tokens the forward took: root + nodes)."""
    tree = build_tree(proposal.candidates or [proposal.tokens.tolist()])
    p = probabilities(lm.extend_tree(tokens[-1], tree), settings)
    if settings.greedy:
        tv = verify_tree_greedy(p, tree)
    elif proposal.typical is not None:  # lossy by design; the drafter asked for it
        tv = verify_tree_typical(p, tree, *proposal.typical)
    else:
        tv = verify_tree_sampled(p, tree, generator)
    lm.keep(len(tokens), tv.path)  # entries [0, len(tokens)) end with the root; then the accepted nodes
    won = tree.paths[tv.winner]
    verdict = Verdict(len(tv.path), tv.next_token, token_probs(p, tree, won), None)
    candidates = tuple(tuple(tree.tokens[n] for n in path) for path in tree.paths)
    tree_step = (candidates, tv.winner) if len(candidates) > 1 else None
    return [tree.tokens[n] for n in won], verdict, tree_step, 1 + len(tree.tokens)


def _event(index, proposed, verdict, eos, produced, budget, proposal) -> StepEvent:
    accepted, next_token, p, q = verdict.accepted, verdict.next_token, verdict.p, verdict.q
    kind = "plain" if not proposed else "bonus" if accepted == len(proposed) else "correction"
    finish = None
    hit = next((i for i, t in enumerate(proposed[:accepted]) if t in eos), None)
    if hit is not None:  # an accepted draft token was EOS: the run ends there, nothing follows it
        proposed, accepted, next_token, finish = proposed[: hit + 1], hit + 1, None, "eos"
        p, q = p[: hit + 1], None if q is None else q[: hit + 1]
    elif next_token in eos:
        finish = "eos"
    added = accepted + (next_token is not None)
    if finish is None and produced + added >= budget:
        finish = "length"
    return StepEvent(
        index=index, proposed=tuple(proposed), accepted=accepted, next_token=next_token, next_kind=kind,
        p=tuple(p), q=None if q is None else tuple(q), draft_s=0.0, verify_s=0.0, step_s=0.0,
        draft_forwards=proposal.forwards if proposal else 0, finish=finish,
    )



def decode(target: LoadedModel, prompt_ids: list[int], settings: Settings, drafter_kind: str = "none",
           draft: Optional[LoadedModel] = None, options: Optional[dict] = None,
           stop: Optional[StopFlag] = None) -> Iterator[StepEvent]:
    """generate() with the drafter named `drafter_kind` (see drafters.build_drafter) sharing a generator seeded
    from the settings: what the CLI, the app and the benchmarks all run. The drafter is built at once."""
    from .drafters import build_drafter

    generator = new_generator(target.device, settings.seed)
    drafter = build_drafter(drafter_kind, settings, generator, target, draft, options)
    return generate(target, prompt_ids, settings, drafter, generator, stop)
