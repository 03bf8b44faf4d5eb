"""Medusa-1 training with self-distillation: the backbone stays frozen, the labels are its own tokens.

1. the base model answers a prompt list (one greedy and some T = 0.7 answers each, many prompts per batch),
   and may also read local text (teacher-forced: its own argmax after each position becomes the label);
2. one no-grad pass keeps its final hidden states h_t; head k learns to predict the token at t + 2 + k from h_t;
3. only the heads train (compact: ResBlocks on top of the frozen LM head), on cached features, so a CPU copes;
   with a shortlist the heads score only the ids the text uses most (plus the tokenizer's first, most common ids).
"""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..drafters.medusa.heads import MedusaHeads
from ..models import LoadedModel
from .configs import MedusaTraining
from .distill import Text, make_shortlist, split_by_group


@dataclass(frozen=True)
class TrainReport:
    steps: int
    first_loss: float
    last_loss: float
    head_accuracy: tuple[float, ...]  # held-out top-1 accuracy of each head
    seconds: float


def _rows(base: LoadedModel, texts: list[Text], heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows (h_t, [token t+2, ..., t+1+heads]) for every t whose next token is part of the answer and whose
    labels lie inside the text; h_t = the base model's final hidden state, from one no-grad pass per text."""
    xs, ys = [], []
    for text in texts:
        first = max(text.answer_from - 1, 0)
        usable = len(text.ids) - 1 - heads
        if usable <= first:
            continue
        run = base.model(input_ids=torch.tensor([text.ids], device=base.device), output_hidden_states=True)
        xs.append(run.hidden_states[-1][0, first:usable].float().cpu())
        after = run.logits[0].argmax(-1).tolist() if text.teacher_forced else text.ids[1:]  # after[i]: token i + 1
        ys.append(torch.tensor([[after[t + 1 + k] for k in range(heads)] for t in range(first, usable)]))
    return torch.cat(xs), torch.cat(ys)


def train_heads(
    base: LoadedModel,
    texts: list[Text],
    config: MedusaTraining,
    *,
    progress: Callable[[str], None] = lambda _: None,
) -> tuple[MedusaHeads, TrainReport]:
    """A share `config.held_out` of the groups is kept apart; the accuracy is measured on its self-written answers
    (what the heads meet while decoding), or on all of it when there are none."""
    began = time.perf_counter()
    num_heads = config.heads
    steps = config.steps
    shortlist = config.shortlist
    train, test = split_by_group(texts, config.held_out, config.seed)
    test = [t for t in test if not t.teacher_forced] or test
    with torch.no_grad():
        train_x, train_y = _rows(base, train, num_heads)
        test_x, test_y = _rows(base, test, num_heads)
    progress(f"{len(train_x)} training rows, {len(test_x)} held out")
    torch.manual_seed(config.seed)
    lm_head = base.model.get_output_embeddings()
    vocab = lm_head.weight.shape[0]
    frozen = torch.nn.Linear(lm_head.weight.shape[1], vocab, bias=False)
    frozen.weight.data = lm_head.weight.detach().float().cpu().clone()
    frozen.requires_grad_(False)
    chosen = make_shortlist(train, vocab, shortlist) if 0 < shortlist < vocab else None
    heads = MedusaHeads(frozen.in_features, vocab, num_heads, config.layers, frozen, chosen)
    if chosen is not None:  # labels become positions in the shortlist; ids outside it cannot be hit (-100)
        where = torch.full((vocab,), -100, dtype=torch.long)
        where[chosen] = torch.arange(len(chosen))
        train_y = where[train_y]
        test_y = where[test_y]
    with torch.no_grad():  # start as the identity: each head first repeats the LM head's guess
        for p in heads.parameters():
            p.zero_()
    optimiser = torch.optim.AdamW(heads.parameters(), lr=config.lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda n: 0.5 * (1 + math.cos(math.pi * n / steps)))
    weights = torch.tensor([0.8**k for k in range(num_heads)])  # later heads matter less (as in the paper)
    first = last = float("nan")
    for step in range(steps):
        pick = torch.randint(len(train_x), (min(config.train_batch, len(train_x)),))
        logits = heads(train_x[pick])  # [K, B, V]
        losses = torch.stack(
            [
                torch.nn.functional.cross_entropy(logits[k], train_y[pick, k], ignore_index=-100)
                for k in range(num_heads)
            ]
        )
        loss = (losses * weights).sum() / weights.sum()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        last = float(loss.detach())
        first = last if step == 0 else first
        if step % 20 == 0 or step == steps - 1:
            progress(f"step {step + 1}/{steps}: loss {last:.3f}")
    with torch.no_grad():
        guess = torch.cat([heads(rows).argmax(-1) for rows in test_x.split(256)], dim=1)  # [K, N]
        accuracy = tuple(float((guess[k] == test_y[:, k]).float().mean()) for k in range(num_heads))
    return heads, TrainReport(steps, first, last, accuracy, time.perf_counter() - began)
