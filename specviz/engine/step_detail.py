"""What a step's explanation records, next to the verdict: the trials the rule made (verify.py), and at every tested
position of the shown candidate a few leading tokens with the target's p, the drafter's q and, where the target's own
token was drawn from something else than p, that residual. Bounded: TOP tokens per distribution, whatever the
vocabulary, gathered in a handful of tensor operations (one host copy each)."""

import torch

from ..events import Leading, StepDetail
from ..settings import Settings
from .step import Verdict
from .tree import TokenTree

TOP = 6  # leading tokens kept per distribution


def step_detail(
    p: torch.Tensor, tree: TokenTree, verdict: Verdict, q: torch.Tensor | None, settings: Settings
) -> StepDetail | None:
    """None for a plain step (nothing drafted, nothing to explain)."""
    if not tree.tokens:
        return None
    shown = tree.paths[verdict.winner]
    tested = verdict.accepted + 1  # the accepted drafts' positions and the one where the target's own token went
    rows = [0, *(1 + n for n in shown)][:tested]  # the target's distribution before each of those positions
    q_rows = list(range(min(tested, len(shown)))) if q is not None else []
    emitted = [tree.tokens[n] for n in shown[: verdict.accepted]] + [verdict.next_token]
    ids = []  # per position: the token emitted there, the one drafted there, then the leaders below
    for i in range(tested):
        ids.append({emitted[i]} | ({tree.tokens[shown[i]]} if i < len(shown) else set()))
    for trial in verdict.trials:  # every sibling tried at a position (they all hang below the accepted path)
        ids[trial.depth - 1].add(trial.token)

    tops = (
        [p[rows]]
        + ([q[q_rows]] if q_rows else [])
        + ([verdict.drawn_from[None]] if verdict.drawn_from is not None else [])
    )
    leaders = torch.topk(torch.cat(tops), min(TOP, p.shape[-1])).indices.tolist()
    for i in range(tested):
        ids[i] |= set(leaders[i])
    for j, i in enumerate(q_rows):
        ids[i] |= set(leaders[len(rows) + j])
    if verdict.drawn_from is not None:
        ids[-1] |= set(leaders[-1])
    ids = [sorted(x) for x in ids]

    def gather(dist: torch.Tensor, positions: list[int], row_of) -> list[list[float]]:
        flat_rows = [row_of(i) for i in positions for _ in ids[i]]
        flat_ids = [t for i in positions for t in ids[i]]
        values = dist[flat_rows, flat_ids].tolist()
        out = []
        for i in positions:
            out.append(values[: len(ids[i])])
            values = values[len(ids[i]) :]
        return out

    p_vals = gather(p, list(range(tested)), lambda i: rows[i])
    q_vals = gather(q, q_rows, lambda i: i) if q_rows else []
    r_vals = gather(verdict.drawn_from[None], [tested - 1], lambda i: 0)[0] if verdict.drawn_from is not None else None
    leading = tuple(
        Leading(
            tuple(ids[i]),
            tuple(p_vals[i]),
            tuple(q_vals[i]) if i < len(q_vals) else None,
            tuple(r_vals) if r_vals is not None and i == tested - 1 else None,
        )
        for i in range(tested)
    )
    rule = "greedy" if settings.greedy else settings.acceptance
    return StepDetail(rule, verdict.trials, leading)
