"""`python -m specviz train-eagle`: texts, features and training, each step's result cached on request."""

import sys
from pathlib import Path


def add_train_eagle(sub, add_model_options) -> None:
    train = sub.add_parser("train-eagle", help="train an EAGLE head on a frozen model by self-distillation")
    train.add_argument("--base", default="smollm2-135m-instruct", help="offline preset, folder or Hub id")
    train.add_argument("--out", required=True, help="folder for config.json + model.safetensors (+ head_vocab.json)")
    train.add_argument("--steps", type=int, default=400)
    train.add_argument("--lr", type=float, default=5e-4)
    train.add_argument("--train-batch", type=int, default=8, help="windows per training step")
    train.add_argument("--window", type=int, default=128, help="pairs per training window")
    train.add_argument("--unroll", type=int, default=2, help="extra passes that feed the head its own guesses")
    train.add_argument("--init", choices=("pass-through", "random"), default="pass-through",
                       help="start as 'the next feature is the last one' (fc passes it on, the layer adds nothing), "
                            "or at random")
    train.add_argument("--intermediate-size", type=int, default=0,
                       help="the layer's MLP width (0: the target's own; smaller drafts and trains faster)")
    train.add_argument("--shortlist", type=int, default=8192, help="the head scores only this many token ids (0: all)")
    train.add_argument("--tokens-per-prompt", type=int, default=224, help="length of each self-written answer")
    train.add_argument("--samples", type=int, default=2, help="answers per prompt: one greedy, the rest at T=0.7")
    train.add_argument("--prompts", help="JSON file: a list of prompts or {kind: [prompts]} "
                                         "(default: assets/medusa_prompts.json, none of them a benchmark prompt)")
    train.add_argument("--batch", type=int, default=16, help="prompts answered together while writing the texts")
    train.add_argument("--local-text", action="append", default=[], metavar="PATH",
                       help="also read local files (*.py, *.md, *.txt; 'stdlib' = Python's own source), teacher-forced")
    train.add_argument("--local-tokens", type=int, default=90_000, help="how many ids of --local-text to read")
    train.add_argument("--texts", metavar="FILE", help="keep the written texts here and reuse them when it exists")
    train.add_argument("--features", metavar="FILE", help="keep the target's features here and reuse them when it exists")
    add_model_options(train)


def cmd_train_eagle(args, fail, read_prompt_list) -> int:
    for name, value, low in (("--steps", args.steps, 1), ("--train-batch", args.train_batch, 1),
                             ("--window", args.window, 8), ("--unroll", args.unroll, 0), ("--shortlist", args.shortlist, 0),
                             ("--tokens-per-prompt", args.tokens_per_prompt, 8), ("--samples", args.samples, 1),
                             ("--batch", args.batch, 1), ("--local-tokens", args.local_tokens, 1)):
        if value < low:
            return fail(f"{name} must be at least {low}, got {value}")
    if args.dtype == "int8":
        return fail("train-eagle reads features from a bfloat16 or float32 base; the head so trained also serves its int8 form")
    from ...models import load_model
    from ...runtime import ASSETS
    from ..distill import load_texts, local_texts, save_texts, self_distilled_texts
    from .checkpoint import save_eagle
    from .train import load_features, read_features, save_features, train_eagle

    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    base = load_model(args.base, args.dtype, args.device)
    cached = Path(args.features) if args.features else None
    if cached and cached.is_file():
        features = load_features(cached)
        log(f"read the features of {len(features)} texts from {cached}")
    else:
        texts_file = Path(args.texts) if args.texts else None
        if texts_file and texts_file.is_file():
            texts = load_texts(texts_file)
            log(f"read {len(texts)} texts from {texts_file}")
        else:
            prompts = read_prompt_list(Path(args.prompts) if args.prompts else ASSETS / "medusa_prompts.json")
            log(f"writing {len(prompts) * args.samples} answers of {args.tokens_per_prompt} tokens with {args.base}")
            texts = self_distilled_texts(base, prompts, args.tokens_per_prompt, args.samples, batch=args.batch, progress=log)
            if texts_file:
                save_texts(texts, texts_file)
        if args.local_text:
            texts += local_texts(base, args.local_text, args.local_tokens)
        features = read_features(base, texts, progress=log)
        if cached:
            save_features(features, cached)
    head, report = train_eagle(base, features, args.steps, args.lr, args.train_batch, args.window, args.unroll,
                               args.shortlist, init=args.init, intermediate=args.intermediate_size, progress=log)
    by_depth = ", ".join(f"{k + 1}: {a:.2f}" for k, a in enumerate(report.acceptance))
    folder = save_eagle(head, args.out, args.base, dtype=base.model.dtype, extra={"specviz_training": {
        "steps": args.steps, "train_tokens": report.train_tokens, "held_out_positions": report.held_out_positions,
        "held_out_acceptance_by_depth": [round(a, 4) for a in report.acceptance], "seconds": round(report.seconds)}})
    print(f"{folder}: loss {report.first_loss:.3f} -> {report.last_loss:.3f} in {report.steps} steps, "
          f"{report.seconds:.0f} s; held-out chain acceptance by depth {by_depth} (tau of a 5-deep chain "
          f"{report.tau:.2f}, {report.held_out_positions} positions)")
    return 0
