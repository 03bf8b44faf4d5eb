"""How far each lookup copies, replayed offline: plain decoding writes one greedy answer per task family (the offline
1.5B target, bfloat16; cached in --outputs), then n-gram lookup, suffix decoding and transformers' prompt lookup
(its rule: the earliest match of the last 3, 2 or 1 tokens, then 10 tokens) each draft at every step from the text so
far; a step keeps the drafted prefix that matches the answer and adds the target's own token. Prints τ (tokens per
verify forward) per family and drafter: what each rule would achieve on the same answers, with no timing noise.

    python scripts/copy_replay.py [--kinds summarization,rag] [--gamma 10] [--outputs /tmp/family-outputs.json]
"""

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specviz.drafters.ngram import NgramDrafter  # noqa: E402
from specviz.drafters.suffix import SuffixDrafter  # noqa: E402

FAMILIES = "code,prose,translation,summarization,qa,math,rag"


def answers(kinds: list[str], path: Path) -> dict:
    """{kind: {"prompt": ids, "output": ids}}: greedy plain decoding, 96 tokens, read from `path` once written."""
    if path.exists():
        return json.loads(path.read_text())
    from specviz.bench.plan import load_prompts
    from specviz.drafters.registry import NO_DRAFTER
    from specviz.events import generated_ids
    from specviz.models import encode_prompt, load_model
    from specviz.runs import generate_named
    from specviz.runtime import quiet_transformers
    from specviz.settings import Settings

    quiet_transformers()
    target = load_model("qwen2.5-coder-1.5b-instruct", "bfloat16")
    found = {}
    for kind, prompt in load_prompts(kinds, 1):
        ids = encode_prompt(target, prompt)
        found[kind] = {"prompt": ids, "output": generated_ids(generate_named(target, ids, Settings(), NO_DRAFTER))}
    path.write_text(json.dumps(found))
    return found


def prompt_lookup(text: list[int], gamma: int, longest: int = 3) -> tuple[int, ...]:
    """transformers' prompt lookup: the earliest earlier match of the last `longest`..1 tokens, then γ tokens."""
    for size in range(min(longest, len(text) - 1), 0, -1):
        for i in range(len(text) - size):
            if text[i : i + size] == text[-size:]:
                return tuple(text[i + size : i + size + gamma])
    return ()


def replay(prompt: list[int], output: list[int], propose) -> float:
    """τ over the answer: each step keeps the longest candidate prefix that matches it, plus one token."""
    at, steps = 0, 0
    while at < len(output):
        candidates = propose(prompt + output[:at])
        held = [
            next((k for k, t in enumerate(c) if at + k >= len(output) or t != output[at + k]), len(c))
            for c in candidates
        ]
        best = max(held, default=0)
        at, steps = at + best + 1, steps + 1
        if candidates:
            propose.observe(held.index(best), best, output[at - 1] if at - 1 < len(output) else 0)
    return len(output) / steps


class Drafted:
    """A specviz drafter as `replay` calls it: candidates from the text so far, then what was kept."""

    def __init__(self, drafter, prompt: list[int], gamma: int):
        self.drafter, self.gamma = drafter, gamma
        drafter.start(prompt)

    def __call__(self, text):
        proposal = self.drafter.propose(text, self.gamma)
        return [] if proposal is None else list(proposal.candidates)

    def observe(self, winner: int, accepted: int, next_token: int) -> None:
        self.drafter.observe(SimpleNamespace(winner=winner, accepted=accepted, next_token=next_token))


class Looked:
    def __init__(self, gamma: int):
        self.gamma = gamma

    def __call__(self, text):
        found = prompt_lookup(text, self.gamma)
        return [found] if found else []

    def observe(self, *verdict) -> None:
        pass


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--kinds", default=FAMILIES)
    p.add_argument("--gamma", type=int, default=10)
    p.add_argument("--outputs", default="/tmp/family-outputs.json", help="where the greedy answers are cached")
    args = p.parse_args()
    kinds = args.kinds.split(",")
    for kind, pair in answers(kinds, Path(args.outputs)).items():
        if kind not in kinds:
            continue
        prompt, output = pair["prompt"], pair["output"]
        taus = {
            "n-gram lookup": replay(prompt, output, Drafted(NgramDrafter(), prompt, args.gamma)),
            "suffix decoding": replay(prompt, output, Drafted(SuffixDrafter(), prompt, args.gamma)),
            "transformers prompt lookup": replay(prompt, output, Looked(args.gamma)),
        }
        print(
            f"{kind:13s} {len(prompt):4d} prompt tokens, γ {args.gamma}: "
            + ", ".join(f"{k} τ {v:.2f}" for k, v in taus.items())
        )


if __name__ == "__main__":
    main()
