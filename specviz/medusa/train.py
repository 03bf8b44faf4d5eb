"""Medusa-1 training with self-distillation: the backbone stays frozen, the labels are its own tokens.

1. the base model writes greedy continuations of a prompt list (or is teacher-forced on local text);
2. one no-grad pass keeps its final hidden states h_t; head k learns to predict token t + 2 + k from h_t;
3. only the heads train (compact: ResBlocks on top of the frozen LM head), on cached features, so a CPU copes.
"""

import random
import time
from dataclasses import dataclass
from typing import Callable

import torch

from ..engine import generate
from ..events import generated_ids
from ..models import LoadedModel, encode_prompt
from ..settings import Settings
from .heads import MedusaHeads


@dataclass(frozen=True)
class TrainReport:
    steps: int
    first_loss: float
    last_loss: float
    head_accuracy: tuple[float, ...]  # held-out top-1 accuracy of each head
    seconds: float


def self_distilled_texts(base: LoadedModel, prompts: list[str], max_new_tokens: int, samples: int = 1,
                         temperature: float = 0.7) -> list[list[int]]:
    """Prompt + the base model's own continuations, as token ids: one greedy, then `samples - 1` sampled ones."""
    out = []
    for text in prompts:
        ids = encode_prompt(base, text)
        for seed in range(samples):
            settings = Settings(max_new_tokens=max_new_tokens, temperature=temperature if seed else 0.0, seed=seed)
            out.append(ids + generated_ids(generate(base, ids, settings)))
    return out


@torch.inference_mode()
def features(base: LoadedModel, sequences: list[list[int]]) -> list[tuple[torch.Tensor, list[int]]]:
    """(final hidden states [T, H] as float32, the ids) per sequence."""
    out = []
    for ids in sequences:
        run = base.model(input_ids=torch.tensor([ids], device=base.device), output_hidden_states=True)
        out.append((run.hidden_states[-1][0].float().cpu(), ids))
    return out


def _batches(feats, heads: int):
    """Rows (h_t, [token t+2, ..., t+1+heads]) for every t with all labels inside the sequence."""
    xs, ys = [], []
    for hidden, ids in feats:
        usable = len(ids) - 1 - heads
        if usable > 0:
            xs.append(hidden[:usable])
            ys.append(torch.tensor([[ids[t + 2 + k] for k in range(heads)] for t in range(usable)]))
    return torch.cat(xs), torch.cat(ys)


def train_heads(base: LoadedModel, sequences: list[list[int]], num_heads: int = 4, num_layers: int = 1,
                steps: int = 200, lr: float = 1e-3, batch: int = 64, held_out: float = 0.15, seed: int = 0,
                group: int = 1, progress: Callable[[str], None] = lambda _: None) -> tuple[MedusaHeads, TrainReport]:
    """`group` consecutive sequences share a prompt and stay on the same side of the held-out split."""
    began = time.perf_counter()
    groups = [sequences[i : i + group] for i in range(0, len(sequences), group)]
    random.Random(seed).shuffle(groups)
    cut = max(1, int(len(groups) * held_out))
    train_x, train_y = _batches(features(base, [s for g in groups[cut:] for s in g]), num_heads)
    test_x, test_y = _batches(features(base, [s for g in groups[:cut] for s in g]), num_heads)
    torch.manual_seed(seed)
    lm_head = base.model.get_output_embeddings()
    frozen = torch.nn.Linear(lm_head.in_features, lm_head.out_features, bias=False)
    frozen.weight.data = lm_head.weight.detach().float().cpu().clone()
    frozen.requires_grad_(False)
    heads = MedusaHeads(frozen.in_features, frozen.out_features, num_heads, num_layers, frozen)
    with torch.no_grad():  # start as the identity: each head first repeats the LM head's guess
        for p in heads.parameters():
            p.zero_()
    optimiser = torch.optim.AdamW(heads.parameters(), lr=lr)
    weights = torch.tensor([0.8 ** k for k in range(num_heads)])  # later heads matter less (as in the paper)
    first = last = float("nan")
    for step in range(steps):
        pick = torch.randint(len(train_x), (min(batch, len(train_x)),))
        logits = heads(train_x[pick])  # [K, B, V]
        losses = torch.stack([torch.nn.functional.cross_entropy(logits[k], train_y[pick, k]) for k in range(num_heads)])
        loss = (losses * weights).sum() / weights.sum()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        last = float(loss.detach())
        first = last if step == 0 else first
        if step % 20 == 0 or step == steps - 1:
            progress(f"step {step + 1}/{steps}: loss {last:.3f}")
    with torch.no_grad():
        guess = heads(test_x).argmax(-1)  # [K, N]
        accuracy = tuple(float((guess[k] == test_y[:, k]).float().mean()) for k in range(num_heads))
    return heads, TrainReport(steps, first, last, accuracy, time.perf_counter() - began)
