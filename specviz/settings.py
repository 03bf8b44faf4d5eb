"""Generation settings, validated once: the engine, CLI and UI all share these limits."""

import math
from dataclasses import dataclass

from .errors import InvalidRequest

MAX_NEW_TOKENS = 4096  # documented cap; also bounded by the model's context
MAX_GAMMA = 32


@dataclass(frozen=True)
class Settings:
    max_new_tokens: int = 128
    gamma: int = 4  # draft length: tokens proposed per verification step
    temperature: float = 0.0  # 0 means greedy
    top_k: int = 0  # 0 disables top-k
    top_p: float = 1.0  # 1 disables top-p
    seed: int = 0
    adaptive: bool = False  # choose γ per step (up to `gamma`) from the measured acceptance and costs

    def __post_init__(self):
        if not isinstance(self.max_new_tokens, int) or not 1 <= self.max_new_tokens <= MAX_NEW_TOKENS:
            raise InvalidRequest(f"max new tokens must be an integer in 1..{MAX_NEW_TOKENS}, got {self.max_new_tokens!r}")
        if not isinstance(self.gamma, int) or not 1 <= self.gamma <= MAX_GAMMA:
            raise InvalidRequest(f"gamma (draft length) must be an integer in 1..{MAX_GAMMA}, got {self.gamma!r}")
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise InvalidRequest(f"temperature must be a finite number >= 0, got {self.temperature!r}")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise InvalidRequest(f"top-k must be an integer >= 0 (0 disables it), got {self.top_k!r}")
        if not (0 < self.top_p <= 1):  # also rejects NaN
            raise InvalidRequest(f"top-p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.seed, int):
            raise InvalidRequest(f"seed must be an integer, got {self.seed!r}")
        if not isinstance(self.adaptive, bool):
            raise InvalidRequest(f"adaptive must be true or false, got {self.adaptive!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def check_prompt(text: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidRequest("the prompt is empty")
    return text


MAX_NGRAM, MAX_CANDIDATES = 8, 16


def lookup_options(ngram_max, candidates, choice) -> dict:
    """Validated options of the lookup drafters (ignored by the others)."""
    if not isinstance(ngram_max, int) or not 1 <= ngram_max <= MAX_NGRAM:
        raise InvalidRequest(f"n-gram size must be an integer in 1..{MAX_NGRAM}, got {ngram_max!r}")
    if not isinstance(candidates, int) or not 1 <= candidates <= MAX_CANDIDATES:
        raise InvalidRequest(f"history candidates (m) must be an integer in 1..{MAX_CANDIDATES}, got {candidates!r}")
    if choice not in ("recent", "random"):
        raise InvalidRequest(f"history choice must be recent or random, got {choice!r}")
    return {"ngram_max": ngram_max, "candidates": candidates, "choice": choice}


# Medusa candidate trees as index paths: (i0, i1, ...) = head 0's i0-th guess, then head 1's i1-th, ...
MEDUSA_TREES = {
    "sparse": ((0,), (0, 0), (1,), (0, 1), (0, 0, 0), (1, 0), (2,), (0, 0, 0, 0), (0, 2), (0, 0, 1), (3,)),
    "chain": ((0,), (0, 0), (0, 0, 0), (0, 0, 0, 0)),
    "wide": ((0,), (1,), (2,), (3,), (4,), (0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0), (3, 0), (0, 3),
             (0, 0, 0), (0, 0, 1), (0, 1, 0), (1, 0, 0), (0, 0, 2), (2, 1), (0, 0, 0, 0), (0, 0, 0, 1),
             (0, 0, 1, 0), (0, 1, 0, 0), (1, 0, 0, 0)),
}
ACCEPTANCE_MODES = ("greedy", "lossless", "typical")
MAX_TREE_PATHS, MAX_TREE_WIDTH = 64, 32


def medusa_tree(spec) -> tuple[tuple[int, ...], ...]:
    """A named tree (sparse, chain, wide) or index paths as JSON text, e.g. '[[0], [0, 0], [1]]'."""
    if isinstance(spec, str) and spec.strip() in MEDUSA_TREES:
        return MEDUSA_TREES[spec.strip()]
    import json

    try:
        paths = json.loads(spec) if isinstance(spec, str) else spec
    except ValueError:
        paths = None
    ok = (isinstance(paths, (list, tuple)) and 0 < len(paths) <= MAX_TREE_PATHS
          and all(isinstance(p, (list, tuple)) and 0 < len(p) <= MAX_GAMMA
                  and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < MAX_TREE_WIDTH for i in p)
                  for p in paths))
    if not ok:
        raise InvalidRequest(f"Medusa tree must be one of {', '.join(MEDUSA_TREES)} or a JSON list of up to "
                             f"{MAX_TREE_PATHS} index paths like [[0], [0, 0], [1]] (indexes 0..{MAX_TREE_WIDTH - 1})")
    return tuple(tuple(p) for p in paths)


def medusa_options(heads, tree="sparse", acceptance="lossless", temperature: float = 0.0) -> dict:
    """Validated Medusa options. greedy acceptance = exact greedy verification, so it needs temperature 0;
    lossless = tree rejection sampling (greedy at T = 0); typical = Medusa's lossy typical acceptance."""
    if acceptance not in ACCEPTANCE_MODES:
        raise InvalidRequest(f"acceptance must be one of {', '.join(ACCEPTANCE_MODES)}, got {acceptance!r}")
    if acceptance == "greedy" and temperature != 0:
        raise InvalidRequest("greedy acceptance needs temperature 0; use lossless or typical for sampling")
    return {"medusa": heads, "medusa_tree": medusa_tree(tree), "acceptance": acceptance}
