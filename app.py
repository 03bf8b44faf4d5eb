"""specviz app: `python app.py` here, and what a Hugging Face Space runs.

Flags (or environment): --host/SPECVIZ_HOST, --port/SPECVIZ_PORT (else GRADIO_SERVER_PORT, else PORT, else 7860),
--share, --target/--draft for a pair of your own (offline preset, folder or Hub id) with the heads it brings
(--medusa/SPECVIZ_MEDUSA, --eagle/SPECVIZ_EAGLE: one flag per drafter option that locates a model), --device,
--dtype, --no-preload, --cluster/SPECVIZ_CLUSTER (Your prompts on a Ray cluster: "local" or an address).
"""

try:  # ZeroGPU: `spaces` must be imported before torch; elsewhere it is absent and GPU work runs undecorated.
    import spaces
except ImportError:
    spaces = None

import argparse
import os
import sys
import threading
import time

from specviz.app.backend import Backend
from specviz.app.device_calls import (
    DeviceCalls,
    decode_seconds,
    grand_prix_seconds,
    race_seconds,
    under_load_seconds,
)
from specviz.app.request import read_request
from specviz.app.shelf import ModelShelf, PairPreset, default_pairs
from specviz.app.ui.layout import build_app, launch_options
from specviz.drafters.registry import default_kind, kinds, pair_model_options
from specviz.engine.static_lm import warm_graphs
from specviz.errors import SpecvizError
from specviz.models.device import describe, resolve_device, zero_gpu
from specviz.models.loading import best_draft_dtype, quiet_transformers
from specviz.runtimes.runtime_registry import names as runtime_names
from specviz.runtimes.runtime_registry import offered as runtimes_offered
from specviz.runtimes.runtime_registry import runtime, runtimes


def parse_args(argv=None):
    env = os.environ.get
    p = argparse.ArgumentParser(description="specviz: speculative decoding you can see")
    p.add_argument("--host", default=env("SPECVIZ_HOST", env("GRADIO_SERVER_NAME", "127.0.0.1")))
    p.add_argument("--port", type=int, default=int(env("SPECVIZ_PORT", env("GRADIO_SERVER_PORT", env("PORT", "7860")))))
    p.add_argument("--share", action="store_true", default=env("SPECVIZ_SHARE", "") == "1")
    p.add_argument("--target", default=env("SPECVIZ_TARGET"), help="a pair of your own: target model")
    p.add_argument("--draft", default=env("SPECVIZ_DRAFT"), help="a pair of your own: draft model")
    brought = pair_model_options()  # where a model a drafter loads is found (heads): a pair of your own brings it
    for spec in brought:
        p.add_argument(
            spec.cli_flag,
            dest=spec.name,
            default=env("SPECVIZ_" + spec.name.upper(), ""),
            help=f"a pair of your own: {spec.label} for its target",
        )
    p.add_argument("--device", default=env("SPECVIZ_DEVICE", "auto"), choices=["auto", "cpu", "cuda"])
    p.add_argument(
        "--dtype",
        default=env("SPECVIZ_DTYPE", ""),
        choices=["", "auto", "bfloat16", "float32", "int8"],
        help="the precision loaded first (default: auto on a CPU, measured on this device once; bfloat16 on a GPU); "
        "under ZeroGPU the only one",
    )
    p.add_argument(
        "--runtime",
        default=env("SPECVIZ_RUNTIME", "auto"),
        choices=["auto", *runtime_names()],
        help="what computes the models first (default: auto, measured on this device among the runtimes that run the "
        "pair here); the sidebar offers the others: " + "; ".join(r.help_line() for r in runtimes()),
    )
    p.add_argument("--no-preload", action="store_true", help="do not load the default pair at start")
    p.add_argument("--queue-size", type=int, default=int(env("SPECVIZ_QUEUE_SIZE", "16")))
    p.add_argument(
        "--cluster",
        default=env("SPECVIZ_CLUSTER", ""),
        help='Your prompts runs on a Ray cluster: "local" starts one here, else its address (needs specviz[cluster])',
    )
    args = p.parse_args(argv)
    if bool(args.target) != bool(args.draft):
        p.error("--target and --draft go together")
    for spec in brought:
        if getattr(args, spec.name) and not args.target:
            p.error(f"{spec.cli_flag} belongs to a pair of your own (--target and --draft)")
    return args


def device_calls(shelf):
    """The device side. Under ZeroGPU each call is a `spaces.GPU` call with a duration computed from its request
    (the package runs it in a forked worker and pickles what goes in and out); elsewhere the calls run as they are."""

    calls = DeviceCalls(shelf)
    if zero_gpu() and spaces is not None:
        calls.race = spaces.GPU(duration=race_seconds)(calls.race)
        calls.decode = spaces.GPU(duration=decode_seconds)(calls.decode)
        calls.grand_prix = spaces.GPU(duration=grand_prix_seconds)(calls.grand_prix)
        calls.under_load = spaces.GPU(duration=under_load_seconds)(calls.under_load)
        calls.divergence = spaces.GPU(duration=20)(calls.divergence)
    return calls


def added_pairs(env) -> str:
    """Whether visitors may name pairs of their own ("on"), else why not: off on a public Space (any visitor could
    make it download any model) unless its owner sets SPECVIZ_ADD_PAIRS=1; on elsewhere unless set to 0."""
    default = "0" if env.get("SPACE_ID") else "1"
    if env.get("SPECVIZ_ADD_PAIRS", default) == "1":
        return "on"
    return (
        "naming a pair of your own is off on this Space; its owner can turn it on with SPECVIZ_ADD_PAIRS=1"
        if env.get("SPACE_ID")
        else "naming a pair of your own is off (SPECVIZ_ADD_PAIRS=0)"
    )


def build(args):
    """The app's Blocks for parsed flags: the pairs, the drafters the registry finds, the device side."""

    quiet_transformers()
    device = resolve_device(args.device)  # a GPU that CUDA cannot start is refused here, in one line
    gpu = device.type == "cuda"
    custom = None
    if args.target:
        brings = tuple((s.name, getattr(args, s.name)) for s in pair_model_options() if getattr(args, s.name))
        custom = PairPreset(f"{args.target} ← {args.draft}", args.target, args.draft, brings)
    pairs = default_pairs(gpu, custom)
    # auto: the precision whose verify is cheapest on this CPU, measured once (models/precision_choice.py)
    dtypes = first(args.dtype, ["bfloat16", "float32"] if gpu else ["auto", "bfloat16", "float32", "int8"])
    offered = first(args.runtime, runtimes_offered(args.device))  # those this device runs, auto among them
    print(f"specviz: {describe(device, dtypes[0])}; runtime {offered[0]}", file=sys.stderr, flush=True)
    for name in offered:
        if name != "auto":
            print(f"specviz: {runtime(name).device_line(device)}", file=sys.stderr, flush=True)
    shelf = ModelShelf(pairs, args.device, added_pairs(os.environ), offered)
    # The draft precision a race starts with: the one measured fastest here (int8 on a CPU), else the target's. A
    # ZeroGPU Space serves one pair at one precision, pinned below.
    draft_precision = "" if zero_gpu() else best_draft_dtype(device)  # "": the target's
    if zero_gpu():
        # ZeroGPU moves weights to the GPU only from the thread that imported `spaces`, and only before launch():
        # the one pair this Space serves is loaded here, on the main thread, and no other can be loaded later.
        pairs, dtypes = pairs[:1], dtypes[:1]
        shelf.get(pairs[0].label, dtypes[0], report=_say)
        for line in shelf.load_heads():  # a GPU call's process dies with what it loads: the heads come now
            _say(line)
        shelf.pin(
            f"on ZeroGPU this Space serves {pairs[0].label} ({dtypes[0]}), placed on the GPU at start-up; its "
            f"owner picks another with SPECVIZ_TARGET and SPECVIZ_DRAFT"
        )
    elif not args.no_preload:  # the server answers at once; a run started meanwhile waits for this load
        threading.Thread(
            target=_preload, args=(shelf, pairs[0].label, dtypes[0], gpu, draft_precision, offered[0]), daemon=True
        ).start()
    backend = Backend(shelf, device_calls(shelf), cluster=args.cluster)
    # On a CPU a 64-token race takes ~25 s; a GPU runs longer answers in the same time.
    return build_app(
        backend,
        [p.label for p in pairs],
        kinds(menu_only=True),
        dtypes,
        256 if gpu else 64,
        draft_precision or "same",
        tuple(offered),
        "; ".join(f"{name}: {runtime(name).summary}" for name in offered if name != "auto"),
    )


def main(argv=None):
    args = parse_args(argv)
    try:
        demo = build(args)
    except SpecvizError as exc:  # a GPU that cannot start, a pinned pair that cannot load: one line, exit 2
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    demo.queue(max_size=args.queue_size)
    demo.launch(server_name=args.host, server_port=args.port, share=args.share, ssr_mode=False, **launch_options())


def _say(line):
    print(f"specviz: {line}", file=sys.stderr, flush=True)


def first(chosen: str, choices: list[str]) -> list[str]:
    """`choices` with `chosen` first, where it is one of them: what a choice starts at."""
    return [chosen, *(c for c in choices if c != chosen)] if chosen in choices else list(choices)


def _preload(shelf, label, dtype, gpu, draft_dtype="", runtime_name="auto"):
    try:
        shelf.get(label, dtype, report=_say, draft_dtype=draft_dtype, runtime=runtime_name)
        if gpu:  # CUDA's start-up (context, kernels, allocator) is paid here, not by the first visitor's plain side
            began = time.perf_counter()
            warm_up(shelf, label, dtype)
            _say(f"warmed up on the GPU in {time.perf_counter() - began:.1f} s")
    except Exception as exc:  # shown again on the first run; the server keeps serving
        _say(f"could not preload {label}: {exc}")


def warm_up(shelf, label, dtype, say=_say):
    """The fast path tried piece by piece on both models (a piece that fails is named in one line and the pair
    runs the eager, dynamic-cache path), then one short race with each drafter the pair can run, before any
    visitor's: both sides' first forwards run here, every cache a drafter keeps (heads read the target's hidden
    states, so theirs is a cache of its own) is made, and the CUDA graphs of each are captured for every width a
    step of up to 15 drafts uses. A drafter whose race fails here is named in one line; the default's failure
    fails the warm-up."""

    pair = shelf.current()
    for loaded in pair.loaded() if pair else ():
        line = loaded.try_fast_path()
        if line:
            say(line)
            pair.run_eagerly()

    default = default_kind()
    for kind in (default, *(k for k in kinds(menu_only=True) if k is not default)):
        ask = dict(pair=label, drafter=kind.name, dtype=dtype, prompt="Say hello.", max_new_tokens=16)
        try:
            asked = read_request(ask, shelf)
        except SpecvizError:
            continue  # not offered with this pair (no heads for its target)
        failed = next((p.message for p in DeviceCalls(shelf).race(asked) if p.kind == "error"), None)
        if failed is not None and kind is default:
            raise RuntimeError(failed)
        if failed is not None:
            say(f"warm-up: the {kind.listing.label} race failed: {failed}")
    pair = shelf.current()
    for model in (pair.target.model, pair.draft.model):
        warm_graphs(model)


if __name__ == "__main__":
    main()
