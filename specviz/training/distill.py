"""Self-distillation text, shared by the heads trained on a frozen target (Medusa, EAGLE): the target's own answers
to a prompt list, and local files read teacher-forced (the label after each position is the target's own argmax,
not the file's next token). Split into groups (one prompt's answers, one file) so held-out sets split by prompt."""

import json
import random
import sysconfig
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import GenerationConfig

from ..models import LoadedModel, encode_prompt


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
def self_distilled_texts(
    base: LoadedModel,
    prompts: list[str],
    max_new_tokens: int,
    samples: int = 1,
    temperature: float = 0.7,
    batch: int = 16,
    progress: Callable[[str], None] = lambda _: None,
) -> list[Text]:
    """Prompt + the base model's own continuations as token ids, `samples` per prompt in prompt order: the first
    greedy, the rest sampled. Prompts go through transformers' generate `batch` at a time (left-padded)."""

    tok = base.tokenizer
    eos = base.eos_ids
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
        config = GenerationConfig(
            max_new_tokens=max_new_tokens,
            do_sample=not greedy,
            temperature=temperature,
            top_k=0,
            top_p=1.0,
            repetition_penalty=1.0,
            pad_token_id=pad,
            eos_token_id=sorted(eos),
        )
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
    out = []
    taken = 0
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


def split_by_group(texts: list[Text], held_out: float, seed: int = 0) -> tuple[list[Text], list[Text]]:
    """(training, held-out): a share `held_out` of the groups (at least one) goes wholly to the held-out side."""
    names = sorted({t.group for t in texts})
    random.Random(seed).shuffle(names)
    kept_apart = set(names[: max(1, int(len(names) * held_out))])
    return [t for t in texts if t.group not in kept_apart], [t for t in texts if t.group in kept_apart]
