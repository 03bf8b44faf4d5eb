"""Suffix decoding: find the longest earlier match of the text's end, in this run (prompt and output) and in earlier
runs kept in the caller's RunMemory, and verify the most frequent continuations of all equally long matches together
as a token tree. A long match drafts deep and wide, a short one a token or two: both the depth and the number of tree
nodes are at most the suffix factor times the match length, so a guess backed by little evidence costs little to
verify. A repeated task copies a whole earlier answer in a few steps. No second model and no probabilities: every
candidate is a point mass."""

from ..serving.declaration import CacheLimits, LlamaSpecType, Serving, VllmMethod
from .contract import BaseDrafter, DrafterProfile, Proposal, Provenance, Recipe, Verdict
from .listing import FamilyBest, Listing
from .ngram import KIND as NGRAM
from .options import Options, option
from .suffix_index import RunMemory, draft_depth, frequent_tree, longest_match


class SuffixDrafter(BaseDrafter):
    """Begins a run in the memory at start(); the run holds only committed tokens: those the engine passes to
    propose(), and after each verdict the accepted draft tokens and the target's own token."""

    profile = DrafterProfile(copies=True)

    def __init__(
        self, depth_per_token: float = 4, nodes: int = 16, runs: int = 16, memory: RunMemory | None = None, eos_ids=()
    ):
        self.depth_per_token = depth_per_token
        self.nodes = nodes
        self.runs = runs
        self.memory = RunMemory(max_runs=0) if memory is None else memory  # private: this run alone
        self.eos_ids = frozenset(eos_ids)
        self.run = None
        self.last: tuple[tuple[int, ...], ...] = ()  # the last proposal's candidates
        self.match = 0  # the length of the last lookup's match (0: none)

    def max_nodes(self, gamma: int) -> int:
        return self.nodes

    def start(self, prompt_ids: list[int], target=None, judges=None) -> None:
        self.run = self.memory.begin(prompt_ids)
        self.last = ()

    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        if self.run is None:
            self.start([])
        self.run.follow(tokens)
        self.last = ()
        found = longest_match(self.run, self.memory.earlier(self.run, self.runs))
        self.match = found[0].length if found else 0
        if not found:
            return None
        size = draft_depth(found[0].length, self.depth_per_token, self.nodes)  # tokens this match is worth verifying
        candidates, origin = frequent_tree(found, min(gamma, size), size)
        if not candidates:
            return None
        self.last = candidates
        return Proposal(candidates, source=Provenance(origin=origin))

    def observe(self, verdict: Verdict) -> None:
        if not self.last:
            return
        committed = [*self.last[verdict.winner][: verdict.accepted], verdict.next_token]
        end = next((i + 1 for i, t in enumerate(committed) if t in self.eos_ids), len(committed))
        self.run.extend(committed[:end])  # nothing after an EOS is ever emitted
        self.last = ()


class SuffixOptions(Options):
    suffix_factor: int = option(
        4,
        "suffix depth per matched token",
        "a match of m tokens drafts up to m × this "
        "many tokens, in depth (γ caps it) and in all (the node budget caps it)",
        low=1,
        high=8,
    )
    suffix_nodes: int = option(
        16, "suffix tree nodes", "the most draft tokens verified together in one step", low=1, high=64
    )
    suffix_runs: int = option(
        16,
        "earlier runs searched",
        "the most recent earlier runs drafted from, as far as the caller keeps them (0: this run only)",
        low=0,
        high=64,
    )


def _build(options: SuffixOptions, ctx) -> SuffixDrafter:
    return SuffixDrafter(
        options.suffix_factor, options.suffix_nodes, options.suffix_runs, ctx.memory, ctx.target.eos_ids
    )


KIND = Recipe(
    "suffix",
    SuffixOptions,
    _build,
    Listing(
        "suffix decoding (across runs)",
        "the most frequent continuations of the longest earlier "
        "match, in this run and earlier ones, verified together as a token tree",
        order=35,
        preferred=(("gamma", 10), ("adaptive", True)),  # a copy holds in runs: let adaptive γ copy up to 10
        lookup=True,
        # the family suite, whole-call tok/s, medians of 3, AMX Xeon, 2026-12-03 (docs/benchmarks.md); an earlier
        # repetition workload
        best_for=(
            FamilyBest("summarization", 10, adaptive=True),  # 4.35 (n-gram adaptive 4.34, level)
            FamilyBest("document", 10, adaptive=True),  # 8.46 (n-gram adaptive 7.90)
            FamilyBest("repeat_sql", 16, adaptive=False),  # 3.3x on run 2
        ),
    ),
    remembers=True,
    serving=Serving(
        transformers=NGRAM.as_nearest(
            "prompt lookup copies from this request only, one chain: no tree, no earlier requests"
        ),
        vllm=VllmMethod(
            "suffix", cache=CacheLimits(lambda o: o.suffix_factor, lambda o: o.suffix_runs), adaptive_verification=True
        ),
        sglang=NGRAM.as_nearest("SGLang's n-gram cache (earlier requests' tokens too), not a suffix tree"),
        llama_cpp=LlamaSpecType(
            "ngram-mod",
            note="llama.cpp's nearest: a hash of n-grams shared across requests, one next token each, no suffix tree",
        ),
        tree=True,
    ),
)
