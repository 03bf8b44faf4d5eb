"""Medusa-1 training with self-distillation: the backbone stays frozen, the labels are its own tokens.

1. the base model answers a prompt list (one greedy and some T = 0.7 answers each, many prompts per batch),
   and may also read local text (teacher-forced: its own argmax after each position becomes the label);
2. one no-grad pass keeps its final hidden states h_t; head k learns to predict the token at t + 2 + k from h_t;
3. only the heads train (compact: ResBlocks on top of the frozen LM head), on cached features, so a CPU copes;
   with a shortlist the heads score only the ids the text uses most (plus the tokenizer's first, most common ids).
"""

import json
import math
import random
import sysconfig
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch

from ...models import LoadedModel, encode_prompt
from .heads import MedusaHeads


@dataclass(frozen=True)
class TrainReport:
    steps: int
    first_loss: float
    last_loss: float
    head_accuracy: tuple[float, ...]  # held-out top-1 accuracy of each head
    seconds: float


@dataclass(frozen=True)
class Text:
    ids: list[int]
    answer_from: int  # the first id the heads learn from (the answer, not the prompt)
    group: str  # texts of one group (one prompt's answers) stay on the same side of the held-out split
    teacher_forced: bool = False  # labels: the base's argmax after each position, not the next id of `ids`


def save_texts(texts: list[Text], path: Path) -> None:
    path.write_text(json.dumps([asdict(t) for t in texts]))


def load_texts(path: Path) -> list[Text]:
    return [Text(**t) for t in json.loads(path.read_text())]


@torch.inference_mode()
def self_distilled_texts(base: LoadedModel, prompts: list[str], max_new_tokens: int, samples: int = 1,
                         temperature: float = 0.7, batch: int = 16,
                         progress: Callable[[str], None] = lambda _: None) -> list[Text]:
    """Prompt + the base model's own continuations as token ids, `samples` per prompt in prompt order: the first
    greedy, the rest sampled. Prompts go through transformers' generate `batch` at a time (left-padded)."""
    from transformers import GenerationConfig

    tok, eos = base.tokenizer, base.eos_ids
    pad = tok.pad_token_id if tok.pad_token_id is not None else min(eos)
    jobs = [(encode_prompt(base, text), sample) for text in prompts for sample in range(samples)]
    out: list[Text] = [Text([], 0, "") for _ in jobs]
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i][1] > 0, len(jobs[i][0])))  # greedy first, similar lengths
    torch.manual_seed(0)
    for start in range(0, len(order), batch):
        part = order[start : start + batch]
        greedy = jobs[part[0]][1] == 0 and all(jobs[i][1] == 0 for i in part)
        width = max(len(jobs[i][0]) for i in part)
        ids = torch.tensor([[pad] * (width - len(jobs[i][0])) + jobs[i][0] for i in part], device=base.device)
        mask = torch.tensor([[0] * (width - len(jobs[i][0])) + [1] * len(jobs[i][0]) for i in part], device=base.device)
        config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=not greedy, temperature=temperature,
                                  top_k=0, top_p=1.0, repetition_penalty=1.0, pad_token_id=pad, eos_token_id=sorted(eos))
        written = base.model.generate(input_ids=ids, attention_mask=mask, generation_config=config)[:, width:].tolist()
        for i, new in zip(part, written):
            end = next((n + 1 for n, t in enumerate(new) if t in eos), len(new))
            out[i] = Text(jobs[i][0] + new[:end], len(jobs[i][0]), f"prompt {i // samples}")
        progress(f"wrote {min(start + batch, len(order))}/{len(order)} texts")
    return out


def local_texts(base: LoadedModel, sources: list[str], tokens: int, chunk: int = 512, seed: int = 0) -> list[Text]:
    """Up to `tokens` ids of local files (*.py, *.md, *.txt under the given files or folders; "stdlib" = Python's
    standard library source) in chunks of `chunk`, files in a seeded random order; teacher-forced."""
    files = []
    for source in sources:
        root = Path(sysconfig.get_paths()["stdlib"] if source == "stdlib" else source).expanduser()
        files += [root] if root.is_file() else sorted(f for ext in ("py", "md", "txt") for f in root.rglob(f"*.{ext}"))
    random.Random(seed).shuffle(files)
    out, taken = [], 0
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        ids = base.tokenizer.encode(text, add_special_tokens=False)
        for start in range(0, len(ids) - 16, chunk):
            piece = ids[start : start + chunk][: tokens - taken]
            out.append(Text(piece, 0, f"{path}", teacher_forced=True))
            taken += len(piece)
            if taken >= tokens:
                return out
    return out


def make_shortlist(texts: list[Text], vocab: int, size: int) -> torch.Tensor:
    """The `size` ids the answers use most, topped up with the lowest ids (BPE gives common strings low ids)."""
    ids = [t for t, _ in Counter(t for text in texts for t in text.ids[text.answer_from :]).most_common(size)]
    chosen = set(ids)
    for t in range(vocab):
        if len(ids) >= size:
            break
        if t not in chosen:
            ids.append(t)
    return torch.tensor(sorted(ids))


def _rows(base: LoadedModel, texts: list[Text], heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows (h_t, [token t+2, ..., t+1+heads]) for every t whose next token is part of the answer and whose
    labels lie inside the text; h_t = the base model's final hidden state, from one no-grad pass per text."""
    xs, ys = [], []
    for text in texts:
        first, usable = max(text.answer_from - 1, 0), len(text.ids) - 1 - heads
        if usable <= first:
            continue
        run = base.model(input_ids=torch.tensor([text.ids], device=base.device), output_hidden_states=True)
        xs.append(run.hidden_states[-1][0, first:usable].float().cpu())
        after = run.logits[0].argmax(-1).tolist() if text.teacher_forced else text.ids[1:]  # after[i]: token i + 1
        ys.append(torch.tensor([[after[t + 1 + k] for k in range(heads)] for t in range(first, usable)]))
    return torch.cat(xs), torch.cat(ys)


def train_heads(base: LoadedModel, texts: list[Text], num_heads: int = 4, num_layers: int = 1,
                steps: int = 200, lr: float = 1e-3, batch: int = 64, held_out: float = 0.15, seed: int = 0,
                shortlist: int = 0,
                progress: Callable[[str], None] = lambda _: None) -> tuple[MedusaHeads, TrainReport]:
    """A share `held_out` of the groups is kept apart; the accuracy is measured on its self-written answers
    (what the heads meet while decoding), or on all of it when there are none.
    `shortlist` > 0 limits the heads to that many ids (chosen from the training side only)."""
    began = time.perf_counter()
    names = sorted({t.group for t in texts})
    random.Random(seed).shuffle(names)
    kept_apart = set(names[: max(1, int(len(names) * held_out))])
    train = [t for t in texts if t.group not in kept_apart]
    test = [t for t in texts if t.group in kept_apart]
    test = [t for t in test if not t.teacher_forced] or test
    with torch.no_grad():
        train_x, train_y = _rows(base, train, num_heads)
        test_x, test_y = _rows(base, test, num_heads)
    progress(f"{len(train_x)} training rows, {len(test_x)} held out")
    torch.manual_seed(seed)
    lm_head = base.model.get_output_embeddings()
    vocab = lm_head.weight.shape[0]
    frozen = torch.nn.Linear(lm_head.weight.shape[1], vocab, bias=False)
    frozen.weight.data = lm_head.weight.detach().float().cpu().clone()
    frozen.requires_grad_(False)
    chosen = make_shortlist(train, vocab, shortlist) if 0 < shortlist < vocab else None
    heads = MedusaHeads(frozen.in_features, vocab, num_heads, num_layers, frozen, chosen)
    if chosen is not None:  # labels become positions in the shortlist; ids outside it cannot be hit (-100)
        where = torch.full((vocab,), -100, dtype=torch.long)
        where[chosen] = torch.arange(len(chosen))
        train_y, test_y = where[train_y], where[test_y]
    with torch.no_grad():  # start as the identity: each head first repeats the LM head's guess
        for p in heads.parameters():
            p.zero_()
    optimiser = torch.optim.AdamW(heads.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda n: 0.5 * (1 + math.cos(math.pi * n / steps)))
    weights = torch.tensor([0.8 ** k for k in range(num_heads)])  # later heads matter less (as in the paper)
    first = last = float("nan")
    for step in range(steps):
        pick = torch.randint(len(train_x), (min(batch, len(train_x)),))
        logits = heads(train_x[pick])  # [K, B, V]
        losses = torch.stack([torch.nn.functional.cross_entropy(logits[k], train_y[pick, k], ignore_index=-100)
                              for k in range(num_heads)])
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
