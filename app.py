"""specviz app: `python app.py` here, and what a Hugging Face Space runs.

Flags (or environment): --host/SPECVIZ_HOST, --port/SPECVIZ_PORT (else GRADIO_SERVER_PORT, else PORT, else 7860),
--share, --target/--draft for a pair of your own (offline preset, folder or Hub id), --device, --no-preload.
"""

try:  # ZeroGPU: `spaces` must be imported before torch; elsewhere it is absent and GPU work runs undecorated.
    import spaces
except ImportError:
    spaces = None

import argparse
import os
import sys
import threading


def parse_args(argv=None):
    env = os.environ.get
    p = argparse.ArgumentParser(description="specviz: speculative decoding you can see")
    p.add_argument("--host", default=env("SPECVIZ_HOST", env("GRADIO_SERVER_NAME", "127.0.0.1")))
    p.add_argument("--port", type=int, default=int(env("SPECVIZ_PORT", env("GRADIO_SERVER_PORT", env("PORT", "7860")))))
    p.add_argument("--share", action="store_true", default=env("SPECVIZ_SHARE", "") == "1")
    p.add_argument("--target", default=env("SPECVIZ_TARGET"), help="a pair of your own: target model")
    p.add_argument("--draft", default=env("SPECVIZ_DRAFT"), help="a pair of your own: draft model")
    p.add_argument("--medusa", default=env("SPECVIZ_MEDUSA", ""), help="a pair of your own: Medusa heads for its target")
    p.add_argument("--eagle", default=env("SPECVIZ_EAGLE", ""), help="a pair of your own: EAGLE heads for its target")
    p.add_argument("--device", default=env("SPECVIZ_DEVICE", "auto"), choices=["auto", "cpu", "cuda"])
    p.add_argument("--no-preload", action="store_true", help="do not load the default pair at start")
    p.add_argument("--queue-size", type=int, default=int(env("SPECVIZ_QUEUE_SIZE", "16")))
    args = p.parse_args(argv)
    if bool(args.target) != bool(args.draft):
        p.error("--target and --draft go together")
    for flag in ("medusa", "eagle"):
        if getattr(args, flag) and not args.target:
            p.error(f"--{flag} belongs to a pair of your own (--target and --draft)")
    return args


def on_device(fn):
    """ZeroGPU lends a GPU only inside decorated calls; a plain function everywhere else."""
    return spaces.GPU(duration=180)(fn) if spaces is not None else fn


def build(args):
    """The app's Blocks for parsed flags: the pairs, the drafters the registry finds, the device side."""
    import torch

    from specviz.app.backend import Backend
    from specviz.app.shelf import ModelShelf, PairPreset, default_pairs
    from specviz.app.ui.layout import build_app
    from specviz.drafters.registry import kinds
    from specviz.runtime import quiet_transformers

    quiet_transformers()
    gpu = torch.cuda.is_available() or spaces is not None
    custom = None
    if args.target:
        brings = tuple((flag, getattr(args, flag)) for flag in ("medusa", "eagle") if getattr(args, flag))
        custom = PairPreset(f"{args.target} ← {args.draft}", args.target, args.draft, brings)
    pairs = default_pairs(gpu, custom)
    shelf = ModelShelf(pairs, args.device)
    backend = Backend(shelf)
    backend.race, backend.sweep, backend.compare = (on_device(f) for f in (backend.race, backend.sweep, backend.compare))
    dtypes = ["bfloat16", "float32"] if gpu else ["bfloat16", "float32", "int8"]  # int8: torch's CPU kernels
    if not args.no_preload:  # the server answers at once; a run started meanwhile waits for this load
        threading.Thread(target=_preload, args=(shelf, pairs[0].label, dtypes[0]), daemon=True).start()
    # On a CPU a 64-token race takes ~25 s; a GPU runs longer answers in the same time.
    max_new = 256 if torch.cuda.is_available() else 64
    return build_app(backend, [p.label for p in pairs], kinds(menu_only=True), dtypes, max_new)


def main(argv=None):
    from specviz.app.ui.layout import launch_options

    args = parse_args(argv)
    demo = build(args)
    demo.queue(max_size=args.queue_size)
    demo.launch(server_name=args.host, server_port=args.port, share=args.share, ssr_mode=False, **launch_options())


def _preload(shelf, label, dtype):
    try:
        shelf.get(label, dtype, report=lambda line: print(f"specviz: {line}", file=sys.stderr, flush=True))
    except Exception as exc:  # shown again on the first run; the server keeps serving
        print(f"specviz: could not preload {label}: {exc}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
