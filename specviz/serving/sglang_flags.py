"""A drafter as SGLang serves it: `python -m sglang.launch_server` with its `--speculative-*` flags, as SGLang's
server arguments name them."""

from .declaration import SglangAlgorithm
from .handoff import Ran


def launch(ran: Ran) -> str:
    """The launch command that decodes plainly."""
    return f"python -m sglang.launch_server --model-path {ran.target}"


def write(ran: Ran, way: SglangAlgorithm, own: bool) -> str:
    """The launch command for `way`; `own`: the drafter's own algorithm, with its options (else at its defaults)."""
    options = ran.options if own else None
    gamma = ran.settings.gamma
    flags = [launch(ran), f"--speculative-algorithm {way.algorithm}"]
    if way.weights is not None:
        flags.append(f"--speculative-draft-model-path {way.weights.location(options, ran.draft)}")
    if way.block:
        flags.append(f"--speculative-num-draft-tokens {gamma}")
    else:  # a chain of γ steps, one candidate each: γ + 1 tokens verified with the root
        flags += [f"--speculative-num-steps {gamma}", "--speculative-eagle-topk 1"]
        flags.append(f"--speculative-num-draft-tokens {gamma + 1}")
    if way.window is not None:
        flags.append(f"--speculative-ngram-min-match-window-size {way.window.shortest_for(options)}")
        flags.append(f"--speculative-ngram-max-match-window-size {way.window.longest}")
    return " \\\n  ".join(flags)


def gives_up(way, options) -> str:
    return ""
