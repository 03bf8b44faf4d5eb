"""Turning a finished run into a Trace: the text of every token that appears, and for greedy runs where (if anywhere)
each drafter's output parted from plain decoding, with the target's top two there. Needs the target model."""

import time
from collections.abc import Callable, Iterable

import torch

from .events import StepEvent
from .models import LoadedModel
from .trace import Divergence, RunModels, Side, Trace


class TokenTexts:
    """id -> the text of that one token, remembered (Figure-1 rows ask for the same ids again and again)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.seen = {}

    def __call__(self, token: int) -> str:
        if token not in self.seen:
            self.seen[token] = self.tokenizer.decode([token])
        return self.seen[token]


class TextTable(dict):
    """id -> text for the ids someone already decoded (a device call sends them with its steps), called like
    TokenTexts; an id it was never sent shows as <id>."""

    def __call__(self, token: int) -> str:
        return self.get(token, f"<{token}>")


@torch.inference_mode()
def divergence(
    target: LoadedModel, prompt_ids: list[int], plain: list[int], spec: list[int], text_of: Callable[[int], str]
) -> Divergence | None:
    """First position where the outputs differ (over their common length), with the target's top-2 there."""
    at = next((i for i, (a, b) in enumerate(zip(plain, spec)) if a != b), None)
    if at is None:
        return None
    probs = torch.softmax(target.next_logits(prompt_ids + plain[:at]).float(), dim=-1)
    top = torch.topk(probs, 2)
    return Divergence(
        at,
        text_of(plain[at]),
        text_of(spec[at]),
        tuple((text_of(int(i)), float(p)) for p, i in zip(top.values, top.indices)),
    )


def token_ids(events: Iterable[StepEvent]) -> set[int]:
    """Every token id an event shows: drafts, the target's token, losing candidates, the explanation's leaders."""
    ids = set()
    for e in events:
        ids.update(e.proposed)
        ids.update(c for cand in (e.candidates or ()) for c in cand)
        if e.next_token is not None:
            ids.add(e.next_token)
        if e.detail is not None:
            ids.update(t.token for t in e.detail.trials)
            ids.update(i for lead in e.detail.leading for i in lead.ids)
    return ids


def make_trace(
    *,
    kind: str,
    prompt,
    prompt_ids: list[int],
    settings,
    models: RunModels,
    sides: list[Side],
    text_of: Callable[[int], str],
    wall_s: float = 0.0,
    stopped: bool = False,
    made_with: str = "",
    extra: dict | None = None,
) -> Trace:
    """Plain decoding's side first; the drafters' sides carry their divergence already (greedy runs)."""
    texts = {t: text_of(t) for s in sides for t in sorted(token_ids(s.events))}
    return Trace(
        kind=kind,
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        prompt=prompt if isinstance(prompt, str) else str(prompt),
        prompt_tokens=len(prompt_ids),
        settings=dict(settings.__dict__),
        models=models,
        sides=sides,
        texts=texts,
        wall_s=wall_s,
        stopped=stopped,
        made_with=made_with,
        extra=dict(extra or {}),
    )
