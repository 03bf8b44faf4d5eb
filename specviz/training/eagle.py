"""EAGLE heads by self-distillation on a CPU: the target stays frozen and teaches the head to continue its features.

1. texts: the target's own answers to prompts and local files read teacher-forced (distill.py, as for Medusa);
2. one no-grad prefill per text keeps the target's final hidden states f_i and its greedy token after each
   position (a prefill reads a token far more cheaply than generating one, so most text is read, not written);
3. the head reads windows of pairs (f_i, x_{i+1}) and learns f_{i+1}: cross-entropy against the target's own
   next-token distribution (its LM head on f_{i+1}, over the shortlist) plus a smooth-L1 pull towards f_{i+1};
4. "training-time test": `unroll` more passes feed each row the head's previous output in place of the target's
   feature, as drafting deeper does, attending to the true pairs before it and to its own chain of guesses;
5. the held-out texts (whole prompts and files kept apart) give the acceptance by depth of a greedy chain: the
   share of answer positions whose first k drafted tokens all equal the target's greedy tokens.
"""

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from ..drafters.eagle.eagle_checkpoint import EagleCheckpointError, head_config
from ..drafters.eagle.head import EagleHead
from ..engine.kv_cache import KVCache
from ..errors import first_line
from ..models import LoadedModel
from .configs import EagleTraining
from .distill import Text, make_shortlist, split_by_group


@dataclass(frozen=True)
class Features:
    ids: torch.Tensor  # [L] token ids
    hidden: torch.Tensor  # [L, H] the target's final hidden state after each token (bfloat16)
    greedy: torch.Tensor  # [L] the target's argmax after each token
    answer_from: int
    group: str
    teacher_forced: bool


@dataclass(frozen=True)
class EagleReport:
    steps: int
    first_loss: float
    last_loss: float
    acceptance: tuple[float, ...]  # held-out P(a greedy chain's first k tokens all match), k = 1..depth
    held_out_positions: int
    train_tokens: int
    seconds: float

    @property
    def tau(self) -> float:
        """Expected tokens per target forward of a chain as deep as `acceptance` (+1: the target's own token)."""
        return 1.0 + sum(self.acceptance)


@torch.inference_mode()
def read_features(
    base: LoadedModel, texts: list[Text], progress: Callable[[str], None] = lambda _: None, chunk: int = 1024
) -> list[Features]:
    """Step 2: one prefill per text (long texts in pieces of `chunk`, each piece seeing the ones before it)."""

    out = []
    began = time.perf_counter()
    done = 0
    for n, text in enumerate(texts):
        ids = torch.tensor(text.ids, device=base.device)
        cache = KVCache.dynamic(base.model).cache
        hidden = []
        greedy = []
        for start in range(0, len(ids), chunk):
            run = base.model(
                input_ids=ids[None, start : start + chunk],
                past_key_values=cache,
                use_cache=True,
                output_hidden_states=True,
            )
            hidden.append(run.hidden_states[-1][0].to(torch.bfloat16).cpu())
            greedy.append(run.logits[0].argmax(-1).cpu())
        out.append(
            Features(ids.cpu(), torch.cat(hidden), torch.cat(greedy), text.answer_from, text.group, text.teacher_forced)
        )
        done += len(ids)
        if n % 20 == 0 or n == len(texts) - 1:
            rate = done / max(time.perf_counter() - began, 1e-9)
            progress(f"read {n + 1}/{len(texts)} texts, {done} tokens ({rate:.0f} tokens/s)")
    return out


def _windows(features: list[Features], width: int) -> list[tuple[int, int]]:
    """(text, start) of windows of `width` + 2 tokens (pairs i..i+width-1 and their labels), covering each text."""
    spans = []
    for n, f in enumerate(features):
        last = len(f.ids) - width - 2
        if last < 0:
            continue
        starts = list(range(0, last + 1, width))
        if starts[-1] != last:
            starts.append(last)  # the tail, overlapping the window before it
        spans += [(n, s) for s in starts]
    return spans


def _batch(features: list[Features], spans, width: int):
    """Pairs (f_i, x_{i+1}) of each window, the true next features f_{i+1}, and which rows count (their label,
    token i + 2, inside the answer)."""
    feats = []
    ids = []
    nxt = []
    counts = []
    for n, s in spans:
        f = features[n]
        rows = torch.arange(s, s + width)
        feats.append(f.hidden[rows])
        ids.append(f.ids[rows + 1])
        nxt.append(f.hidden[rows + 1])
        counts.append(rows + 2 >= max(f.answer_from, 1))  # the label is token i + 2: an answer token
    return torch.stack(feats), torch.stack(ids), torch.stack(nxt), torch.stack(counts)


def _pass_mask(width: int, k: int, dtype) -> torch.Tensor:
    """[1, 1, width, (k + 1) * width] additive mask of unrolled pass k: row i sees the true pairs j <= i - k, the
    guess of pass m at row i - k + m for 1 <= m < k, and itself."""
    sees = torch.zeros(width, (k + 1) * width, dtype=torch.bool)
    rows = torch.arange(width)
    sees[:, :width] = rows[None, :] <= rows[:, None] - k
    for m in range(1, k + 1):
        col = rows - k + m
        ok = col >= 0
        sees[rows[ok], m * width + col[ok]] = True
    return torch.zeros(sees.shape, dtype=dtype).masked_fill(~sees, torch.finfo(dtype).min)[None, None]


def _passes(head: EagleHead, feats, ids, unroll: int):
    """The head's outputs of pass 0 (true features) and `unroll` more, each row fed its predecessor's guess."""

    batch, width = ids.shape
    positions = torch.arange(width)[None].expand(batch, -1)
    cache = KVCache.dynamic().cache
    outs = []
    inputs = feats
    for k in range(unroll + 1):
        out = head(inputs, ids, positions, _pass_mask(width, k, head.fc.weight.dtype), cache)
        outs.append(out)
        inputs = torch.cat([feats[:, :1], out[:, :-1]], dim=1)  # row i gets the guess made at row i - 1
    return outs


def _init_pass_through(head: EagleHead) -> None:
    """Start as 'the next feature is the last one': fc passes the feature on and the layer adds nothing yet."""
    hidden = head.config.hidden_size
    layer = head.layers[0]
    with torch.no_grad():
        head.fc.weight.normal_(0, 0.02)
        head.fc.weight[:, hidden:] += torch.eye(hidden)
        head.fc.bias.zero_()
        layer.self_attn.o_proj.weight.zero_()
        layer.mlp.down_proj.weight.zero_()


def train_eagle(
    base: LoadedModel,
    features: list[Features],
    config: EagleTraining,
    *,
    progress: Callable[[str], None] = lambda _: None,
) -> tuple[EagleHead, EagleReport]:
    """Steps 3-5 on cached features, in float32 weights with bfloat16 matmuls on a CPU. With `config.checkpoint`, the
    whole training state is kept there every `save_every` steps and at the end, and a run whose checkpoint exists
    goes on from it to `steps` (the total over all runs; `until_step` > 0 stops this run after that step); the head
    is the one an uninterrupted run gives."""
    began = time.perf_counter()
    steps = config.steps
    checkpoint = config.checkpoint
    window = config.window
    train_texts, train, test = _split(features, config.held_out, config.seed)
    model = base.model
    vocab = model.get_output_embeddings().weight.shape[0]
    texts_made = _fingerprint(features) if checkpoint else ""
    saved = _read_state(config, texts_made) if checkpoint and checkpoint.is_file() else None
    if saved is not None:
        chosen = saved["shortlist"]
        intermediate = saved["intermediate"]
    else:
        chosen = make_shortlist(train_texts, vocab, config.shortlist) if 0 < config.shortlist < vocab else None
        intermediate = config.intermediate_size or model.config.intermediate_size
    torch.manual_seed(config.seed)
    shape = head_config({"intermediate_size": intermediate}, model.config)
    head = EagleHead(shape, "eagle1", model, shortlist=chosen).float()
    if config.init == "pass-through" and saved is None:
        _init_pass_through(head)
    spans = _windows(train, window)
    progress(
        f"{len(train)} training texts ({sum(len(f.ids) for f in train)} tokens, {len(spans)} windows of {window}), "
        f"{len(test)} held-out answers"
    )
    trained = [p for p in head.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(trained, lr=config.lr, weight_decay=0.0)
    warm = max(1, steps // 20)

    def rate(n: int) -> float:  # a linear warm-up, then a cosine to 0 at `steps`
        return min(1.0, (n + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(n, steps) / steps))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, rate)
    generator = torch.Generator().manual_seed(config.seed)
    done = 0
    first = float("nan")
    last = float("nan")
    if saved is not None:
        lr_now = config.lr * rate(saved["step"])
        done, first, last = _resume(saved, head, optimiser, schedule, generator=generator, lr=config.lr, lr_now=lr_now)
        progress(f"went on from {checkpoint} at step {done}")
    stop = min(steps, config.until_step) if config.until_step > 0 else steps
    head.train()
    for step in range(done, stop):
        pick = torch.randint(len(spans), (min(config.train_batch, len(spans)),), generator=generator).tolist()
        loss = _loss(head, _batch(train, [spans[i] for i in pick], window), config.unroll)
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        optimiser.step()
        schedule.step()
        last = float(loss.detach())
        first = last if step == 0 else first
        if step % 20 == 0 or step == steps - 1:
            progress(f"step {step + 1}/{steps}: loss {last:.3f} ({time.perf_counter() - began:.0f} s)")
        if checkpoint and ((step + 1) % config.save_every == 0 or step == stop - 1):
            _write_state(config, head, optimiser, generator, step=step + 1, losses=(first, last), texts_made=texts_made)
    head.eval()
    acceptance, positions = chain_acceptance(head, test, config.depth)
    return head, EagleReport(
        max(stop, done), first, last, acceptance, positions, sum(len(f.ids) for f in train), time.perf_counter() - began
    )


def _resume(saved: dict, head: EagleHead, optimiser, schedule, *, generator, lr: float, lr_now: float):
    """A saved training state put back; this run's learning rate and step count set the rate from here on.
    Returns (steps done, first loss, last loss)."""
    head.load_state_dict(saved["head"])
    optimiser.load_state_dict(saved["optimiser"])
    schedule.last_epoch = saved["step"]
    for group in optimiser.param_groups:
        group["initial_lr"], group["lr"] = lr, lr_now
    generator.set_state(saved["generator"])
    return saved["step"], saved["first_loss"], saved["last_loss"]


def _split(features: list[Features], held_out: float, seed: int):
    """(the training texts, their features, the held-out greedy answers): prompts and files are held out apart,
    each in the same share, and a group's texts stay on one side."""
    by_text = [Text(f.ids.tolist(), f.answer_from, f.group, f.teacher_forced) for f in features]
    train_texts = [
        t
        for forced in (False, True)
        for t in split_by_group([t for t in by_text if t.teacher_forced == forced], held_out, seed)[0]
    ]
    train_groups = {t.group for t in train_texts}
    train = [f for f in features if f.group in train_groups]
    return train_texts, train, [f for f in features if f.group not in train_groups and _greedy_answer(f)]


def _loss(head: EagleHead, batch: tuple, unroll: int) -> torch.Tensor:
    """Distillation of a `_batch` over `unroll` passes, pass k weighted 0.8^k: cross-entropy against the target's own
    next-token distribution from the true next feature, plus a small pull of the guessed feature towards it."""
    feats, ids, nxt, counts = batch
    with torch.autocast("cpu", dtype=torch.bfloat16):
        outs = _passes(head, feats.float(), ids, unroll)
        with torch.no_grad():
            teacher = torch.softmax(head.logits(nxt.float()).float(), dim=-1)
        loss = 0.0
        for k, out in enumerate(outs):
            valid = counts.clone()
            valid[:, :k] = False  # pass k needs k rows before it
            logp = torch.log_softmax(head.logits(out).float(), dim=-1)
            ce = -(teacher * logp).sum(-1)
            pull = torch.nn.functional.smooth_l1_loss(out.float(), nxt.float(), reduction="none").mean(-1)
            loss = loss + 0.8**k * ((ce + 0.1 * pull) * valid).sum() / valid.sum().clamp_min(1)
    return loss


def _fingerprint(features: list[Features]) -> str:
    """Which texts a training state was made on: a run may go on only over the same features."""
    digest = hashlib.sha256()
    for f in features:
        digest.update(f.ids.numpy().tobytes())
        digest.update(f"{f.answer_from} {f.group} {f.teacher_forced};".encode())
    return digest.hexdigest()[:16]


def _write_state(
    config: EagleTraining, head: EagleHead, optimiser, generator, *, step: int, losses: tuple, texts_made: str
) -> None:
    """Everything a later run needs to go on as if it had never stopped (`losses`: the first and the last so far);
    written beside `config.checkpoint`, then moved into place."""
    first, last = losses
    state = {
        "head": head.state_dict(),
        "optimiser": optimiser.state_dict(),
        "generator": generator.get_state(),
        "step": step,
        "first_loss": first,
        "last_loss": last,
        "shortlist": head.shortlist,
        "intermediate": head.config.intermediate_size,
        "features": texts_made,
        "seed": config.seed,
        "held_out": config.held_out,
        "width": config.window,
    }
    path = config.checkpoint
    partial = path.with_name(path.name + ".partial")
    torch.save(state, partial)
    partial.replace(path)


def _read_state(config: EagleTraining, texts_made: str) -> dict:
    """The training state at `config.checkpoint`, refused unless made on the same texts, split and windows."""
    path = config.checkpoint
    try:
        state = torch.load(path, weights_only=True)
    except Exception as exc:
        raise EagleCheckpointError(f"cannot read the training state {path}: {first_line(exc)[:160]}") from None
    if state.get("features") != texts_made:
        raise EagleCheckpointError(
            f"the training state {path} was made on other texts; go on with the same "
            f"--features, or start afresh with another --checkpoint"
        )
    for name, value in (("seed", config.seed), ("held_out", config.held_out), ("width", config.window)):
        if state.get(name) != value:
            raise EagleCheckpointError(f"the training state {path} used {name} {state.get(name)}, not {value}")
    return state


def _greedy_answer(f: Features) -> bool:
    """A self-written answer that follows the target's greedy choices (not a sampled one, not a file)."""
    if f.teacher_forced or f.answer_from < 1 or len(f.ids) <= f.answer_from:
        return False
    return float((f.ids[f.answer_from :] == f.greedy[f.answer_from - 1 : -1]).float().mean()) >= 0.9


@torch.no_grad()
def chain_acceptance(head: EagleHead, texts: list[Features], depth: int) -> tuple[tuple[float, ...], int]:
    """Step 5 on whole texts: the share of answer positions from which a greedy chain of the head's top guesses
    matches the target's greedy tokens for 1..depth tokens (the target's own tokens being the text's)."""
    hits = torch.zeros(depth)
    total = 0
    for f in texts:
        n = len(f.ids) - 2  # pairs 0..n-1 have a label
        if n < depth + 1:
            continue
        rows = torch.arange(n)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            outs = _passes(head, f.hidden[rows][None].float(), f.ids[rows + 1][None], depth - 1)
        guesses = [head.token_ids(head.logits(o[0]).float().argmax(-1)) for o in outs]  # [n] per pass
        truth = f.greedy[rows + 1]
        start = max(f.answer_from - 2, 0)
        for i in range(start, n - depth + 1):
            total += 1
            for k in range(depth):
                if int(guesses[k][i + k]) != int(truth[i + k]):
                    break
                hits[k] += 1
    return tuple((hits / max(total, 1)).tolist()), total


def save_features(features: list[Features], path) -> None:
    torch.save([asdict(f) for f in features], path)


def load_features(path) -> list[Features]:
    return [Features(**f) for f in torch.load(path, weights_only=True)]
