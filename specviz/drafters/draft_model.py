"""A smaller model of the same vocabulary drafts with its own KV cache: a chain, sampling as the target would (same
temperature, top-k, top-p) so its probabilities q go to the rejection rule with each token; or a tree of its own top
candidates, grown where it is most confident (tree_growth.py), whose tokens are point masses to the tree rule."""

from dataclasses import replace

import torch

from ..engine.cached_lm import CachedLM
from ..engine.sampling import choose, fit_vocab, probabilities
from ..engine.tree import draft_position
from ..errors import InvalidRequest
from ..models.loading import LoadedModel
from ..models.vocabulary import check_draft_fits, same_vocabulary
from ..serving.declaration import PAIR_DRAFT, AssistedGeneration, LlamaSpecType, Serving, SglangAlgorithm, VllmMethod
from ..settings import MAX_GAMMA, Settings
from .contract import BaseDrafter, DrafterProfile, Proposal, Recipe, Verdict
from .cross_tokenizer import CrossTokenizerDrafter
from .draft_batch import BatchedDraftModel
from .listing import FamilyBest, Listing
from .options import Options, option
from .tree_growth import best_next, columns_to, grow, paths_that_pay, token_probabilities

SHAPES = ("chain", "tree")
WIDTH = 4  # branches expanded per depth, and children kept per branch


class DraftModelDrafter(BaseDrafter):
    profile = DrafterProfile(stops_early=True)  # adaptive: a chain's length, a tree's depth, decided while drafting

    def __init__(
        self,
        draft: LoadedModel,
        settings: Settings,
        generator: torch.Generator,
        vocab_size: int,
        shape: str = "chain",
        nodes: int = 12,
        window: int = 0,
    ):
        self.draft = draft
        self.settings = settings
        self.generator = generator
        self.vocab_size = vocab_size
        self.shape = shape
        self.nodes = nodes
        self.window = window
        self.readable = draft.readable  # ids the draft can be fed
        curve = draft.forward_curve
        if curve:  # a drafted token costs the draft one forward: adaptive γ prices it so from the first step
            self.profile = replace(self.profile, position_s=curve[1])
        self.lm: CachedLM | None = None
        self.blind = False  # the text holds a token the draft cannot read: it drafts no more this run
        self._base = self._count = 0
        self.skipped = 0  # prompt tokens the draft does not read (a long prompt's middle, with a window)

    def max_nodes(self, gamma: int) -> int:
        return gamma if self.shape == "chain" else max(gamma, self.nodes)

    def start(self, prompt_ids: list[int], target=None, judges=None) -> None:
        self.judges = judges
        # With a window, a long prompt reaches the draft as its opening (the instruction) and its end: the draft's
        # prefill and every draft step's attention get cheaper; the target still reads it all, so only what the
        # draft guesses can change, never what is generated.
        self.skipped = max(0, len(prompt_ids) - self.window) if self.window else 0
        head = self.window // 4
        prompt_ids = prompt_ids[:head] + prompt_ids[head + self.skipped :]
        self.lm = self.draft.open_lm(len(prompt_ids) + self.settings.max_new_tokens + WIDTH * MAX_GAMMA + 1)
        self.blind = any(t >= self.readable for t in prompt_ids)
        if not self.blind:
            self.lm.read_prompt(prompt_ids)

    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        # The cache may lag behind `tokens` (tokens accepted last step, the target's own token):
        # the first forward feeds all of them at once, then one drafted token per forward.
        new = tokens[self.skipped + self.lm.length :]
        self.blind = self.blind or any(t >= self.readable for t in new)
        if self.blind:  # a draft with fewer embedding rows than the target has ids: plain steps, still exact
            return None
        self._base = len(tokens) - self.skipped  # the committed text's length as the draft reads it
        feed = torch.tensor(new)
        if self.shape == "tree" and gamma > 1:
            return self._tree(feed, gamma)
        drafted = []
        dists = []
        confidence = []
        for _ in range(gamma):
            probs = probabilities(fit_vocab(self.lm.extend(feed, last_only=True), self.vocab_size), self.settings)
            feed = choose(probs, self.settings, self.generator)
            drafted.append(feed)
            dists.append(probs)
            if self.keep_drafting is not None:  # the length is decided here, from the draft's own probabilities
                confidence.append(float(probs[0, feed[0]]))
                if not self.keep_drafting(confidence):
                    break
        self._count = len(drafted)
        return Proposal(
            (tuple(torch.cat(drafted).tolist()),),
            torch.cat(dists),
            forwards=len(drafted),
            confidence=tuple(confidence) or None,
        )

    @torch.inference_mode()
    def _tree(self, feed: torch.Tensor, gamma: int) -> Proposal | None:
        """The committed text's new tokens in one forward, then one forward per depth over the most confident
        branches; the drafts leave the cache again, so the next step starts from the committed text."""

        def ranked(logits: torch.Tensor):
            return best_next(torch.log_softmax(fit_vocab(logits, self.vocab_size).float(), dim=-1), WIDTH)

        committed = self._base

        def expand(nodes, chosen, depth):
            past = self.lm.length
            logits = self.lm.extend_branches(
                [nodes[n].token for n in chosen],
                [draft_position(committed, depth)] * len(chosen),
                committed,
                [columns_to(nodes, nodes[n].parent) for n in chosen],
            )
            for row, n in enumerate(chosen):
                nodes[n].column = past + row
            return ranked(logits)

        values, ids = ranked(self.lm.extend(feed, last_only=True))
        nodes = grow((values[0], ids[0]), expand, gamma, WIDTH, self.nodes, self.keep_drafting)
        self.lm.truncate(committed)
        self._count = 0
        depth = max(n.depth for n in nodes)
        confidence = None
        paths, leaves = paths_that_pay(nodes, self.nodes, self.tree_size, depth)  # adaptive: perhaps none pay
        if not paths:
            return None
        if self.keep_drafting is not None:  # its first path's probabilities, for the calibration of the next ones
            confidence = tuple(token_probabilities(nodes, leaves[0]))
        return Proposal(tuple(paths), forwards=depth, confidence=confidence)

    def observe(self, verdict: Verdict) -> None:
        # The last drafted token was never fed, so at most gamma - 1 drafts of a chain sit in the cache.
        self.lm.truncate(self._base + max(0, min(verdict.accepted, self._count - 1)))

    def forget(self) -> None:
        """Another drafter's proposal was verified this step: drop this one's drafts from the cache."""
        self.lm.truncate(min(self.lm.length, self._base))


class DraftOptions(Options):
    draft_tree: str = option(
        "chain",
        "draft shape",
        "chain (one sampled token per depth, its probabilities to the "
        "rejection rule) or tree (the draft's top candidates, grown where it is most confident; "
        "a draft of another tokenizer drafts a chain)",
        choices=SHAPES,
    )
    draft_nodes: int = option(
        12,
        "draft tree nodes",
        "the most draft tokens a tree sends to verification (adaptive: "
        "fewer where the measured costs say more would not pay)",
        low=2,
        high=64,
    )
    draft_window: int = option(
        0,
        "draft window",
        "the most prompt tokens the draft reads (its first quarter from the "
        "prompt's opening, the rest from its end; 0: all): a long prompt's draft prefill and "
        "draft steps get cheaper, its guesses perhaps worse (a draft of another tokenizer "
        "reads all)",
        low=0,
        high=8192,
    )


def build_batch(options: DraftOptions, ctx):
    """The draft model for a batch: chains for every row at once (a tree, a window or another tokenizer are a single
    prompt's; in a batch the draft model drafts plain chains of the same vocabulary)."""
    if ctx.draft is None:
        raise InvalidRequest("the draft-model drafter needs a draft model (--draft MODEL)")
    if not same_vocabulary(ctx.target, ctx.draft):
        raise InvalidRequest("a draft model of another tokenizer does not draft for a batch yet")
    return BatchedDraftModel(ctx.draft, ctx.settings, ctx.generator, ctx.target.vocab_size)


def build(options: DraftOptions, ctx):
    """A draft-model drafter for one generation (the hybrid builds its model side with this too)."""
    if ctx.draft is None:
        raise InvalidRequest("the draft-model drafter needs a draft model (--draft MODEL)")
    if not same_vocabulary(ctx.target, ctx.draft):  # another tokenizer: bridged through text
        check_draft_fits(ctx.target, ctx.draft)
        return CrossTokenizerDrafter(ctx.draft, ctx.target, ctx.settings, ctx.generator)
    return DraftModelDrafter(
        ctx.draft,
        ctx.settings,
        ctx.generator,
        ctx.target.vocab_size,
        options.draft_tree,
        options.draft_nodes,
        options.draft_window,
    )


KIND = Recipe(
    "draft",
    DraftOptions,
    build,
    Listing(
        "draft model",
        "a smaller model drafts γ tokens, one forward each (any tokenizer: another one is bridged through text)",
        order=10,
        preferred=(("gamma", 8), ("adaptive", True), ("draft_tree", "tree")),
        describe=lambda o: "draft model" + (f", a tree of {o.draft_nodes} nodes" if o.draft_tree == "tree" else ""),
        counterpart="transformers assisted",
        # the family suite, int8 draft, bfloat16 target, whole-call tok/s, medians of 3, AMX Xeon, 2026-12-03
        # (docs/benchmarks.md); where the best cell's repeats overlapped another's, the earlier choice stays
        best_for=(
            FamilyBest("code", 8, adaptive=True),  # 5.63 (the hybrid at γ 4 6.15, repeats overlapping)
            FamilyBest("translation", 8, adaptive=True),  # 3.68 (γ 4 3.69, level)
            FamilyBest("prose", 8, adaptive=True),  # 3.41 (γ 4 2.78)
            FamilyBest("qa", 4, adaptive=False),  # 4.75 (the hybrid adaptive 2.18)
        ),
    ),
    needs_draft=True,
    build_batch=build_batch,
    serving=Serving(
        transformers=AssistedGeneration(),
        vllm=VllmMethod("draft_model", weights=PAIR_DRAFT, adaptive_verification=True),
        sglang=SglangAlgorithm("STANDALONE", weights=PAIR_DRAFT),
        llama_cpp=LlamaSpecType("draft-simple", weights=PAIR_DRAFT),
        tree=lambda o: o.draft_tree != "chain",
    ),
)
