"""`train-medusa`, `train-eagle` and `train-dflash`: drafters trained on a frozen model by self-distillation. They
share the flags that make the training text (prompts answered by the base, local files read teacher-forced, a cache
of the texts), their checks and the gathering of that text; each adds its own. No torch at import: the CLI parses
first."""

import json
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TypeVar

import torch

from ..drafters.dflash.dflash_checkpoint import build_draft, config_for, save_dflash, spaced_layers, spare_row
from ..drafters.eagle.eagle_checkpoint import save_eagle
from ..drafters.medusa.heads import save_medusa
from ..errors import InvalidRequest
from ..paths import ASSETS
from ..runtimes.pair import PairAsk, open_pair
from ..settings import AUTO
from ..training.configs import DFlashTraining, EagleTraining, MedusaTraining
from ..training.dflash import train_dflash
from ..training.distill import load_texts, local_texts, save_texts, self_distilled_texts
from ..training.eagle import load_features, read_features, save_features, train_eagle
from ..training.medusa import train_heads


@dataclass(frozen=True)
class TrainingText:
    """What a trainer's text flags default to: each self-written text's length, texts per prompt, the ids read from
    local files, what the help calls one text, and the prompt files under assets/."""

    tokens: int
    samples: int
    local_tokens: int
    word: str
    prompts: tuple[str, ...]


HEADS_TEXT = TrainingText(96, 4, 200_000, "text", ("medusa_prompts.json",))
# Drafters that read the target's features: code and text, then the benchmark's task families.
FEATURES_TEXT = TrainingText(224, 2, 90_000, "answer", ("medusa_prompts.json", "family_prompts.json"))

Config = TypeVar("Config")


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def config_from(args, cls: type[Config]) -> Config:
    """A trainer's config (a dataclass) filled from the parsed flags by field name: every field that the command's
    flags define takes the flag's value, the others keep their defaults."""
    return cls(**{f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)})


def _optional_path(value: str) -> Path | None:
    """A file flag's value as a path; an empty one names no file."""
    return Path(value) if value else None


def add_train_commands(sub, add_model_options) -> None:
    for add in (_add_medusa, _add_eagle, _add_dflash):
        add_model_options(add(sub))


def _add_medusa(sub):
    medusa = sub.add_parser("train-medusa", help="train Medusa heads on a frozen model by self-distillation")
    _text_flags(
        medusa,
        "folder for config.json + medusa_lm_head.safetensors",
        MedusaTraining,
        train_batch_help="rows per training step",
        text=HEADS_TEXT,
    )
    _numbers(
        medusa,
        ("--heads", int, MedusaTraining.heads, "heads (head k guesses the token k + 2 positions ahead)"),
        ("--layers", int, MedusaTraining.layers, "residual blocks per head"),
    )
    return medusa


def _add_eagle(sub):
    eagle = sub.add_parser("train-eagle", help="train an EAGLE head on a frozen model by self-distillation")
    _text_flags(
        eagle,
        "folder for config.json + model.safetensors (+ head_vocab.json)",
        EagleTraining,
        train_batch_help="windows per training step",
        text=FEATURES_TEXT,
    )
    _numbers(
        eagle,
        ("--window", int, EagleTraining.window, "pairs per training window"),
        ("--unroll", int, EagleTraining.unroll, "extra passes that feed the head its own guesses"),
        ("--intermediate-size", int, EagleTraining.intermediate_size, "the layer's MLP width (0: the target's own; "
         "smaller drafts and trains faster)"),
    )  # fmt: skip
    eagle.add_argument(
        "--init",
        choices=("pass-through", "random"),
        default=EagleTraining.init,
        help="start as 'the next feature is the last one' (fc passes it on, the layer adds nothing), or at random",
    )
    eagle.add_argument(
        "--features", metavar="FILE", help="keep the target's features here and reuse them when it exists"
    )
    _checkpoint_flags(
        eagle,
        EagleTraining,
        "keep the whole training state here every --save-every steps; when it exists, training goes on from it (same "
        "--features) to --steps, the total over all runs; the head's shape (--shortlist, --intermediate-size, --init) "
        "stays the first run's",
    )
    return eagle


def _add_dflash(sub):
    dflash = sub.add_parser("train-dflash", help="train a DFlash block drafter on a frozen target by self-distillation")
    _text_flags(
        dflash,
        "folder for config.json + model.safetensors (the published DFlash layout)",
        DFlashTraining,
        train_batch_help="blocks per training step",
        text=FEATURES_TEXT,
    )
    dflash.set_defaults(base="qwen2.5-coder-1.5b-instruct")
    _numbers(
        dflash,
        ("--layers", int, 1, "draft layers"),
        ("--block-size", int, 8, "positions one pass fills (the root, then masks)"),
        ("--target-layers", str, "", "the target layers read, e.g. 1,9,17 (default: spread as published)"),
        ("--intermediate-size", int, 0, "the layers' MLP width (0: the target's)"),
        ("--anchors-per-text", int, DFlashTraining.anchors_per_text, "of a step's blocks, how many come from each "
         "text drawn (all of one text are scored in one pass)"),
    )  # fmt: skip
    dflash.add_argument(
        "--features",
        type=_optional_path,
        metavar="FILE",
        help="keep the target's features of the texts here and read them from it when it exists",
    )
    _checkpoint_flags(dflash, DFlashTraining, "keep the training state here; when it exists, go on")
    return dflash


def _numbers(p, *flags: tuple[str, type, object, str]) -> None:
    """A trainer's own plain flags, one (flag, type, default, help) each; the defaults are its config's where it has
    the field (training/configs.py)."""
    for flag, kind, default, about in flags:
        p.add_argument(flag, type=kind, default=default, help=about)


def _checkpoint_flags(p, config, checkpoint_help: str) -> None:
    """--checkpoint, --save-every and --until-step: a long training run kept on disk and resumed."""
    p.add_argument("--checkpoint", type=_optional_path, metavar="FILE", help=checkpoint_help)
    p.add_argument("--save-every", type=int, default=config.save_every, help="steps between two writes of --checkpoint")
    p.add_argument(
        "--until-step",
        type=int,
        default=config.until_step,
        help="stop this run after that step (needs --checkpoint; run again to go on)",
    )


def _text_flags(
    p,
    out_help: str,
    config,
    *,
    train_batch_help: str,
    text: TrainingText,
) -> None:
    p.add_argument("--base", default="smollm2-135m-instruct", help="offline preset, folder or Hub id")
    p.add_argument("--out", required=True, help=out_help)
    p.add_argument("--steps", type=int, default=config.steps)  # defaults: the trainer's config (training/configs.py)
    p.add_argument("--lr", type=float, default=config.lr)
    p.add_argument("--train-batch", type=int, default=config.train_batch, help=train_batch_help)
    p.add_argument(
        "--tokens-per-prompt", type=int, default=text.tokens, help=f"length of each self-written {text.word}"
    )
    p.add_argument(
        "--samples",
        type=int,
        default=text.samples,
        help=f"{text.word}s per prompt: one greedy, the rest sampled at T=0.7",
    )
    p.add_argument(
        "--prompts",
        action="append",
        metavar="FILE",
        help="JSON file: a list of prompts or {kind: [prompts]}; may be given more than once (default: "
        f"{' and '.join('assets/' + name for name in text.prompts)}, none of them a benchmark prompt)",
    )
    p.set_defaults(default_prompts=text.prompts)
    if hasattr(config, "shortlist"):  # heads (or, while training, DFlash's loss) that score a shortlist of ids
        about = "score only this many token ids (0 = the whole vocabulary; DFlash: in its training loss only)"
        p.add_argument("--shortlist", type=int, default=config.shortlist, help=about)
    p.add_argument("--batch", type=int, default=16, help="prompts answered together while writing the texts")
    p.add_argument(
        "--local-text",
        action="append",
        default=[],
        metavar="PATH",
        help="also read local files (*.py, *.md, *.txt; 'stdlib' = Python's own source), teacher-forced",
    )
    p.add_argument("--local-tokens", type=int, default=text.local_tokens, help="how many ids of --local-text to read")
    p.add_argument("--texts", metavar="FILE", help="keep the written texts here and reuse them when it exists")


def _check(args, command: str, *own: tuple[str, int, int]) -> list[str]:
    """The shared checks and the command's own (flag, value, lowest); then the prompts, read before any model loads."""
    for name, value, low in (
        ("--steps", args.steps, 1),
        ("--train-batch", args.train_batch, 1),
        *own,
        ("--tokens-per-prompt", args.tokens_per_prompt, 8),
        ("--samples", args.samples, 1),
        ("--shortlist", getattr(args, "shortlist", 0), 0),
        ("--batch", args.batch, 1),
        ("--local-tokens", args.local_tokens, 1),
    ):
        if value < low:
            raise InvalidRequest(f"{name} must be at least {low}, got {value}")
    if args.dtype == "int8":
        raise InvalidRequest(
            f"{command} trains on a bfloat16 or float32 base; heads so trained also serve its int8 form"
        )
    files = [Path(f) for f in args.prompts] if args.prompts else [ASSETS / name for name in args.default_prompts]
    return [prompt for path in files for prompt in read_prompt_list(path)]


def read_prompt_list(path: Path) -> list[str]:
    """Prompts from a JSON list, or from every list in a JSON object (keys starting with '_' are notes)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InvalidRequest(f"cannot read prompts from {path}: {exc}") from None
    lists = (
        [data]
        if isinstance(data, list)
        else [v for k, v in data.items() if not k.startswith("_")]
        if isinstance(data, dict)
        else []
    )
    prompts = [p for group in lists if isinstance(group, list) for p in group if isinstance(p, str) and p.strip()]
    if not prompts:
        raise InvalidRequest(f"{path} holds no prompts (expected a JSON list of strings or {{kind: [strings]}})")
    return prompts


def _texts(base, args, prompts: list[str]):
    """The self-written answers (from --texts when it exists, else written and kept there) and the local text."""

    cache = Path(args.texts) if args.texts else None
    if cache and cache.is_file():
        texts = load_texts(cache)
        _log(f"read {len(texts)} texts from {cache}")
    else:
        count = len(prompts) * args.samples
        _log(f"writing {count} self-distilled texts of {args.tokens_per_prompt} tokens with {args.base}")
        texts = self_distilled_texts(
            base, prompts, args.tokens_per_prompt, args.samples, batch=args.batch, progress=_log
        )
        if cache:
            save_texts(texts, cache)
    if args.local_text:
        texts += local_texts(base, args.local_text, args.local_tokens)
        _log(f"{sum(len(t.ids) for t in texts if t.teacher_forced)} ids of local text, teacher-forced")
    return texts


def open_base(args):
    """The model a trainer reads, on a runtime that gives its hidden states (--runtime; auto: one that does): a
    runtime named that gives none is one line, before any model loads."""
    runtime = getattr(args, "runtime", AUTO)
    return open_pair(PairAsk(args.base, "", runtime, args.dtype, device=args.device, needs=("hidden_states",))).target


def run_trainer(args) -> int:
    """`train-medusa`, `train-eagle` or `train-dflash`."""
    trainers = {"train-medusa": cmd_train_medusa, "train-eagle": cmd_train_eagle, "train-dflash": cmd_train_dflash}
    return trainers[args.command](args)


def cmd_train_medusa(args) -> int:
    prompts = _check(args, "train-medusa", ("--heads", args.heads, 1), ("--layers", args.layers, 1))
    base = open_base(args)
    texts = _texts(base, args, prompts)
    heads, report = train_heads(base, texts, config_from(args, MedusaTraining), progress=_log)
    folder = save_medusa(heads, args.out, args.base, dtype=base.model.dtype)
    accuracy = ", ".join(f"head {k + 1}: {a:.2f}" for k, a in enumerate(report.head_accuracy))
    print(
        f"{folder}: loss {report.first_loss:.3f} -> {report.last_loss:.3f} in {report.steps} steps, "
        f"{report.seconds:.0f} s; held-out top-1 {accuracy}"
    )
    return 0


def cmd_train_eagle(args) -> int:
    """Texts, then the target's features (from --features when it exists, else read and kept there), then training."""
    prompts = _check(
        args,
        "train-eagle",
        ("--window", args.window, 8),
        ("--unroll", args.unroll, 0),
        ("--save-every", args.save_every, 1),
        ("--until-step", args.until_step, 0),
    )
    if args.until_step and not args.checkpoint:
        raise InvalidRequest("--until-step needs --checkpoint, where the run keeps its state to go on from")
    base = open_base(args)
    cached = Path(args.features) if args.features else None
    if cached and cached.is_file():
        features = load_features(cached)
        _log(f"read the features of {len(features)} texts from {cached}")
    else:
        features = read_features(base, _texts(base, args, prompts), progress=_log)
        if cached:
            save_features(features, cached)
    head, report = train_eagle(base, features, config_from(args, EagleTraining), progress=_log)
    by_depth = ", ".join(f"{k + 1}: {a:.2f}" for k, a in enumerate(report.acceptance))
    folder = save_eagle(
        head,
        args.out,
        args.base,
        dtype=base.model.dtype,
        extra={
            "specviz_training": {
                "steps": report.steps,
                "unroll": args.unroll,
                "train_tokens": report.train_tokens,
                "held_out_positions": report.held_out_positions,
                "held_out_acceptance_by_depth": [round(a, 4) for a in report.acceptance],
                "seconds": round(report.seconds),
            }
        },
    )
    print(
        f"{folder}: loss {report.first_loss:.3f} -> {report.last_loss:.3f} in {report.steps} steps, "
        f"{report.seconds:.0f} s; held-out chain acceptance by depth {by_depth} (tau of a 5-deep chain "
        f"{report.tau:.2f}, {report.held_out_positions} positions)"
    )
    return 0


def cmd_train_dflash(args) -> int:
    """Texts, then the drafter's training on the target's features of them; the drafter saved in the published
    layout, its mask token a spare row of the target's embedding."""
    prompts = _check(
        args,
        "train-dflash",
        ("--layers", args.layers, 1),
        ("--block-size", args.block_size, 2),
        ("--intermediate-size", args.intermediate_size, 0),
        ("--anchors-per-text", args.anchors_per_text, 1),
        ("--save-every", args.save_every, 1),
        ("--until-step", args.until_step, 0),
    )
    if args.until_step and not args.checkpoint:
        raise InvalidRequest("--until-step needs --checkpoint, where the run keeps its state to go on from")
    try:
        chosen = [int(i) for i in args.target_layers.split(",") if i.strip()]
    except ValueError:
        raise InvalidRequest(f"--target-layers must be layer numbers like 1,9,17, got {args.target_layers!r}") from None
    base = open_base(args)
    config = base.model.config
    rows = base.model.get_input_embeddings().weight.shape[0]
    mask = spare_row(base.tokenizer, rows)
    if mask is None:
        raise InvalidRequest(f"{args.base} has no spare embedding row for a mask token ({rows} rows, all ids used)")
    layers = chosen or spaced_layers(config.num_hidden_layers, args.layers)
    saved = config_for(
        config,
        layers=args.layers,
        block_size=args.block_size,
        mask_id=mask,
        target_layers=layers,
        intermediate=args.intermediate_size,
    )

    torch.manual_seed(0)  # the same first weights in every run, so that a resumed run is the uninterrupted one
    draft = build_draft(saved, base.model).float()
    texts = _texts(base, args, prompts)
    began = time.perf_counter()
    losses = train_dflash(
        draft,
        base.model,
        [t.ids for t in texts],
        config_from(args, DFlashTraining),
        log=lambda step, loss: _log(f"step {step + 1}: loss {loss:.3f}") if (step + 1) % 25 == 0 else None,
        forced=[t.teacher_forced for t in texts],
    )
    folder = save_dflash(draft, args.out, args.base, config, dtype=base.model.dtype)
    done = f"loss {losses[0]:.3f} -> {losses[-1]:.3f} in {len(losses)} steps" if losses else "no steps left to run"
    print(f"{folder}: {done}, {time.perf_counter() - began:.0f} s; target layers {layers}, block {args.block_size}")
    return 0
