"""Training a DFlash drafter on a CPU from the target's own continuations.

The data is what the target itself writes (its answers to prompts), so the drafter learns the target's habits, not a
corpus's; local text read teacher-forced adds breadth, labelled by the target's own choice after each token (its
argmax), not by the text's next token. For a sequence the target's features at the drafter's layers are computed
once; a sample is an anchor position a: the context is the features of tokens 0..a−1, the block is [token a, mask,
...], and the labels are those of tokens a+1..a+block−1. A step takes `train_batch` anchors, `anchors_per_text`
of them from each text it draws, and scores all the blocks of one text in one pass (model.fill_blocks: a
block-sparse mask lets each block read its own context and itself), so the text's context rows are projected once
for every block of it. The loss is cross-entropy per position, weighted down the block (an early miss wastes the
whole rest of the block, a late one only itself); the learning rate holds, then falls along a half cosine. Only the
draft's own weights learn; the target's embedding and LM head, which the draft borrows, stay frozen.
"""

import hashlib
import math
import random
from pathlib import Path

import torch
from torch.nn import functional as F

from ..drafters.dflash.model import DFlashDraft
from ..errors import InvalidRequest
from .configs import DFlashTraining

POSITION_DECAY = 0.85  # weight of block position j (1 = the first draft): POSITION_DECAY ** (j - 1)


@torch.inference_mode()
def continuations(model, prompts: list[list[int]], length: int) -> list[list[int]]:
    """Each prompt followed by `length` tokens of the model's own greedy decoding."""
    out = []
    for ids in prompts:
        tokens = torch.tensor([ids])
        written = model.generate(
            tokens,
            attention_mask=torch.ones_like(tokens),
            max_new_tokens=length,
            do_sample=False,
            min_new_tokens=length,
        )
        out.append(written[0].tolist())
    return out


@torch.no_grad()  # not inference mode: the features are inputs of a graph that learns
def read_text(model, tokens: list[int], layers: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """One forward over a text: [T, F] the target's outputs of `layers` (0 = its first layer) for every token, side
    by side, and [T] its labels read teacher-forced: the first token, then the target's argmax after each token."""
    ids = torch.tensor([tokens], device=model.device)
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)
    features = torch.cat([out.hidden_states[i + 1][0] for i in layers], dim=-1)
    return features, torch.cat((ids[0, :1], out.logits[0, :-1].argmax(dim=-1)))


def features_of(model, tokens: list[int], layers: tuple[int, ...]) -> torch.Tensor:
    return read_text(model, tokens, layers)[0]


def texts_features(
    target, texts: list[list[int]], layers: tuple[int, ...], keep: Path | None = None, forced: list[bool] | None = None
) -> tuple[list, list]:
    """The target's features of each text at `layers` and each text's labels (its own tokens; the target's argmax
    after each token where `forced` says the text was read teacher-forced), computed once: read from `keep` when it
    holds these texts' at these layers, else computed and, with `keep`, written there for the next run (of this
    session or a later one) to read."""
    forced = forced or [False] * len(texts)
    made = hashlib.sha256(repr((texts, layers, forced)).encode()).hexdigest()[:16]
    if keep is not None and keep.is_file():
        saved = torch.load(keep, map_location="cpu", weights_only=True)
        if not isinstance(saved, dict) or saved.get("made") != made:
            raise InvalidRequest(f"{keep} holds the features of other texts or other target layers")
        return list(saved["features"]), list(saved["labels"])
    features = []
    labels = []
    for text, by_target in zip(texts, forced):
        read, greedy = read_text(target, text, layers)
        features.append(read)
        labels.append(greedy.cpu() if by_target else torch.tensor(text))
    if keep is not None:
        torch.save({"made": made, "features": features, "labels": labels}, keep.with_suffix(".tmp"))
        keep.with_suffix(".tmp").replace(keep)  # a run stopped while writing leaves no half file
    return features, labels


def blocks_loss(
    draft: DFlashDraft,
    tokens: torch.Tensor,
    features: torch.Tensor,
    anchors: list[int],
    shortlist=None,
    targets: torch.Tensor | None = None,
) -> torch.Tensor:
    """The weighted cross-entropy of the blocks anchored at `anchors` of one text (each block's context: the features
    of the tokens before its anchor), averaged over the blocks; every anchor leaves a whole block of labels, taken
    from `targets` (the text's labels) where given, else from `tokens`. With a `shortlist` (ids, the LM head's rows of
    them, and each id's place in it or −1), only those ids are scored and a label outside it teaches nothing."""
    span = torch.arange(1, draft.block_size, device=features.device)
    labels = (tokens if targets is None else targets)[torch.tensor(anchors, device=features.device)[:, None] + span]
    if shortlist is not None:
        _, rows, place = shortlist
        scores = draft.fill_blocks(features, tokens, anchors, rows)
        labels = place[labels]
    else:
        scores = draft.fill_blocks(features, tokens, anchors)  # [blocks, block − 1, V]
    weights = POSITION_DECAY ** (span - 1).float()
    losses = F.cross_entropy(scores.flatten(0, 1).float(), labels.flatten(), reduction="none", ignore_index=-1)
    return ((losses.view(labels.shape) * weights).sum(dim=1) / weights.sum()).mean()


def shortlist_of(draft: DFlashDraft, texts: list[list[int]], size: int):
    """The `size` ids the texts use most (topped up with the lowest ids), their rows of the LM head, and each id's
    place among them (−1: not in it); None where `size` is 0 or covers the whole vocabulary."""
    head = draft._shared[1].weight
    vocab = head.shape[0]
    if not 0 < size < vocab:
        return None
    counts = torch.bincount(torch.tensor([t for text in texts for t in text]), minlength=vocab)[:vocab]
    order = torch.argsort(-counts.float() - torch.linspace(0, 0.5, vocab), stable=True)  # ties: the lower id first
    ids = order[:size].sort().values
    place = torch.full((vocab,), -1, dtype=torch.long)
    place[ids] = torch.arange(size)
    return ids, head.detach()[ids], place  # in the head's own precision, as the full head scores


def _anchors(rng: random.Random, texts: list[list[int]], block: int, count: int, per_text: int) -> dict[int, list]:
    """`count` anchors for one step, `per_text` of them (distinct) from each text drawn, grouped by text."""
    chosen: dict[int, list[int]] = {}
    while sum(map(len, chosen.values())) < count:
        i = rng.randrange(len(texts))
        places = [a for a in range(1, len(texts[i]) - block + 1) if a not in chosen.get(i, ())]
        take = min(per_text, count - sum(map(len, chosen.values())), len(places))
        chosen.setdefault(i, []).extend(rng.sample(places, take))
    return chosen


def fingerprint(draft: DFlashDraft, sequences: list[list[int]]) -> str:
    """What a saved training state belongs to: these texts, this drafter's shape."""
    shape = [(k, tuple(v.shape)) for k, v in draft.state_dict().items()]
    made = repr((sequences, shape, draft.block_size, draft.target_layers)).encode()
    return hashlib.sha256(made).hexdigest()[:16]


def _resume(checkpoint: Path, made: str, draft, optimizer, *, rng) -> int:
    """The step a saved state reached, its weights, optimizer and sampler restored; a state of other texts or
    another drafter is refused in one line."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    if not isinstance(state, dict) or state.get("made") != made:
        raise InvalidRequest(f"{checkpoint} is the training state of other texts or another drafter shape")
    draft.load_state_dict(state["draft"])
    optimizer.load_state_dict(state["optimizer"])
    rng.setstate(state["rng"])
    return int(state["step"])


def _save(checkpoint: Path, made: str, draft, optimizer, *, rng, step: int) -> None:
    state = {"made": made, "draft": draft.state_dict(), "optimizer": optimizer.state_dict()}
    torch.save({**state, "rng": rng.getstate(), "step": step}, checkpoint.with_suffix(".tmp"))
    checkpoint.with_suffix(".tmp").replace(checkpoint)  # a run stopped while saving leaves the last good state


def learning_rate(config: DFlashTraining, step: int) -> float:
    """The rate of a step: `lr` for the first tenth of the run, then down a half cosine to a tenth of it at the end
    (a function of the step alone, so a resumed run follows the uninterrupted one)."""
    held = config.steps // 10
    if not config.decay or step < held:
        return config.lr
    done = (step - held) / max(config.steps - held, 1)
    return config.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * done)))


def train_dflash(
    draft: DFlashDraft,
    target,
    sequences: list[list[int]],
    config: DFlashTraining,
    *,
    log=None,
    forced: list[bool] | None = None,
) -> list[float]:
    """`config.steps` optimizer steps of `train_batch` blocks of one text each, over `sequences` (token lists the
    target wrote, or read teacher-forced where `forced` says so); returns the loss of each step this run made.
    `log(step, loss)` is called after each, when given. With `checkpoint`, the training state is kept there every
    `save_every` steps and at the end, and a run whose checkpoint exists goes on from it (to `steps` in all, or to
    `until_step` and stops there). With `features`, the target's features and labels of the texts are kept in that
    file and read from it in later runs."""
    checkpoint = config.checkpoint
    anchors = config.train_batch
    rng = random.Random(config.seed)
    kept = [(s, f) for s, f in zip(sequences, forced or [False] * len(sequences)) if len(s) > draft.block_size + 1]
    usable = [s for s, _ in kept]
    forced = [f for _, f in kept]
    if not usable:
        raise InvalidRequest(f"every training text is shorter than a block of {draft.block_size} plus 2 tokens")
    optimizer = torch.optim.AdamW(draft.parameters(), lr=config.lr, weight_decay=0.0)
    made = fingerprint(draft, [*usable, forced])
    start = _resume(checkpoint, made, draft, optimizer, rng=rng) if checkpoint and checkpoint.is_file() else 0
    last = min(config.steps, config.until_step) if config.until_step else config.steps
    frozen = [p for p in target.parameters() if p.requires_grad]
    for p in frozen:
        p.requires_grad_(False)
    features, labels = texts_features(target, usable, draft.target_layers, config.features, forced)
    texts = [torch.tensor(s, device=f.device) for s, f in zip(usable, features)]
    shortlist = shortlist_of(draft, usable, config.shortlist)
    draft.train()
    losses = []
    try:
        for step in range(start, last):
            optimizer.zero_grad()
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(config, step)
            total = 0.0
            chosen = _anchors(rng, usable, draft.block_size, anchors, config.anchors_per_text)
            for i, at in chosen.items():  # one pass per text, over all its anchors this step
                loss = blocks_loss(draft, texts[i], features[i], at, shortlist, labels[i]) * len(at) / anchors
                loss.backward()
                total += float(loss.detach())
            torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
            optimizer.step()
            losses.append(total)
            if log is not None:
                log(step, total)
            if checkpoint and ((step + 1) % config.save_every == 0 or step + 1 == last):
                _save(checkpoint, made, draft, optimizer, rng=rng, step=step + 1)
    finally:
        draft.eval()
        for p in frozen:
            p.requires_grad_(True)
    return losses
