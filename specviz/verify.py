"""The verdict on a chain of draft tokens: the Leviathan/Chen rule, and its greedy special case."""

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Verdict:
    accepted: int  # length of the accepted prefix
    next_token: int  # correction after a rejection, bonus after full acceptance
    p: list[float]  # target probability of each draft token
    q: list[float] | None  # draft probability of each draft token


def verify_greedy(p: torch.Tensor, draft: torch.Tensor, q: torch.Tensor | None = None) -> Verdict:
    """p: [g+1, V] target probabilities, draft: [g]. Accept while the draft equals the target's argmax."""
    g = draft.shape[0]
    best = p.argmax(dim=-1)
    accepted = int((best[:g] == draft).int().cumprod(0).sum())
    return Verdict(accepted, int(best[accepted]), _at(p[:g], draft), None if q is None else _at(q, draft))


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)): what p still owes after q's proposals were accepted where p allowed."""
    r = (p - q).clamp_min(0)
    total = r.sum(dim=-1, keepdim=True)
    # total == 0 means p == q, where a rejection has probability 0; fall back to p for round-off.
    return torch.where(total > 0, r / total.clamp_min(1e-30), p)


def verify_sampled(p: torch.Tensor, q: torch.Tensor, draft: torch.Tensor, generator: torch.Generator) -> Verdict:
    """p: [g+1, V] target, q: [g, V] draft probabilities, draft: [g] tokens with draft[i] ~ q[i].

    1. accept draft[i] with probability min(1, p_i(x)/q_i(x)): one uniform r_i per position, all at once
    2. the step keeps the accepted prefix, up to the first rejection
    3. after a rejection at i the next token ~ norm(max(0, p_i - q_i)); if none was rejected, ~ p_g (bonus)
    Together these make every output token distributed exactly as the target alone would sample it.
    """
    g = draft.shape[0]
    p_x, q_x = p[torch.arange(g), draft], q[torch.arange(g), draft]
    r = torch.rand(g, generator=generator, device=p.device)
    accepted = int((r * q_x < p_x).int().cumprod(0).sum())
    dist = p[g] if accepted == g else residual(p[accepted], q[accepted])
    next_token = int(torch.multinomial(dist, 1, generator=generator))
    return Verdict(accepted, next_token, p_x.tolist(), q_x.tolist())


def _at(probs: torch.Tensor, tokens: torch.Tensor) -> list[float]:
    return probs[torch.arange(tokens.shape[0]), tokens].tolist()
