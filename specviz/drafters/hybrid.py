"""The hybrid drafter: at every step a lookup (suffix decoding over the prompt, this output and earlier runs) and a
model drafter (the draft model, or the target's EAGLE head) both offer a draft, and the step verifies the one that
promises more tokens per second.

A lookup costs no forward, and a long match copies many tokens; the model drafter pays a forward per depth and
drafts well where nothing was written before. Each side's worth is measured on the run itself: tokens a step
added (accepted drafts + the target's own) and seconds it took (drafting + verification), as decayed averages,
the lookup's by how long its match was. The lookup's draft goes to verification when

    tokens(lookup, its match length) / seconds(lookup)  ≥  tokens(model) / seconds(model)

Before a side is measured its priors stand in: a lookup of m matched tokens is worth 1 + m/2 tokens, the model 3,
and the model's step costs 1.5 times a lookup's. Either way the target verifies, so the output is the target's.

With the copy branch on, when the model drafts a tree and the lookup found a copy too, the copy's best continuation
goes along as one more branch of that tree (at most γ nodes more), so one forward verifies both: the copy is free to
draft, and a step the model would have lost to a copy that held is not lost. Both are point masses, which the tree
rule verifies as one tree. By default it rides where the target runs on a GPU, whose forward costs about the same
over 1 or 21 tokens; on a CPU each row costs a few percent of a forward, about what the copy's tokens are worth,
and two measurements did not settle which way it goes, so there it stays off unless asked for.
"""

import time
from dataclasses import replace

import torch

from ..events import HEAD, MODEL  # the origin of a step a model drafted; a lookup's names where it copied
from ..serving.declaration import PAIR_DRAFT, LlamaSpecType, Serving
from .contract import BaseDrafter, DrafterProfile, Proposal, Recipe, Verdict
from .draft_model import KIND as DRAFT_MODEL
from .draft_model import DraftOptions
from .draft_model import build as build_draft_model
from .eagle import KIND as EAGLE
from .eagle import EagleOptions
from .listing import FamilyBest, Listing
from .options import Options, option, shared_option
from .suffix import SuffixDrafter, SuffixOptions

BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16)  # match lengths told apart: a bucket holds matches from its bound to the next
DECAY = 0.8  # weight an older step keeps in the averages
MODEL_COST = 1.5  # prior: seconds of a model step / seconds of a lookup step


def bucket(match: int) -> int:
    return max(i for i, low in enumerate(BUCKETS) if match >= low)


class Average:
    """A decayed mean that starts from a prior (None: unknown until the first sample)."""

    def __init__(self, prior=None):
        self.value = prior

    def add(self, sample: float) -> None:
        self.value = sample if self.value is None else DECAY * self.value + (1 - DECAY) * sample


class HybridDrafter(BaseDrafter):
    def __init__(self, lookup: SuffixDrafter, model, origin: str = MODEL, branch: bool = False):
        self.lookup = lookup  # origin: the model's name on screen
        self.model = model
        self.origin = origin
        self.branch = branch  # the copy rides along as a branch of the model's tree
        # the model's draft length is decided while drafting, and an EAGLE head reads the target's hidden states
        self.profile = DrafterProfile(hidden_layers=model.profile.hidden_layers, stops_early=model.profile.stops_early)
        self.tokens = {MODEL: Average(3.0), **{b: Average(1 + BUCKETS[b] / 2) for b in range(len(BUCKETS))}}
        self.seconds = {MODEL: Average(), "lookup": Average()}
        self.chosen = None  # MODEL or the lookup's bucket, for the step in flight
        self.judges = None  # start() decides whether the model side drafts this run
        self.with_model = True
        self.began = 0.0

    def max_nodes(self, gamma: int) -> int:
        return max(self.lookup.max_nodes(gamma), self.model.max_nodes(gamma) + gamma * self.branch)

    def rate(self, side) -> float:
        """Expected tokens per second of a step drafted by `side` (MODEL, or the lookup's match bucket)."""
        model = self.seconds[MODEL].value
        lookup = self.seconds["lookup"].value
        if side == MODEL:
            seconds = model if model is not None else MODEL_COST * (1.0 if lookup is None else lookup)
        else:
            seconds = lookup if lookup is not None else 1.0 if model is None else model / MODEL_COST
        return self.tokens[side].value / seconds

    def model_pays(self) -> bool:
        """Whether the model side could pay here: by costs measured before the run (its one-token forward against
        the target's verify), none of its drafts might, and then only the lookup drafts (a Q4 draft model on a CPU,
        where a verify of two tokens costs 1.6 plain steps and the draft 0.6)."""
        judged = self.judges.could_pay if self.judges is not None else None
        cost = self.model.profile.position_s
        return judged is None or cost is None or judged(cost)

    def start(self, prompt_ids: list[int], target=None, judges=None) -> None:
        self.judges = judges
        self.lookup.start(prompt_ids)  # its drafts are as long as its match: nothing for the judges to size
        self.with_model = self.model_pays()  # decided once: the judges' estimates move during the run
        if self.with_model:
            self.model.start(prompt_ids, target, judges)

    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        self.began = time.perf_counter()
        copied = self.lookup.propose(tokens, gamma)
        if not self.with_model:
            self.chosen = bucket(self.lookup.match) if copied is not None else None
            return copied
        if copied is not None and self.rate(bucket(self.lookup.match)) >= self.rate(MODEL):
            self.chosen = bucket(self.lookup.match)
            return copied
        self.lookup.last = ()  # it learns the committed text at its next lookup, whichever branch held
        self.chosen = MODEL
        drafted = self.model.propose(tokens, gamma)
        if drafted is None:
            return None
        return self.beside(replace(drafted, source=replace(drafted.source, origin=self.origin)), copied)

    def beside(self, drafted: Proposal, copied: Proposal | None) -> Proposal:
        """The model's tree with the copy's best continuation as one more candidate, unless the tree already holds
        it or the model sampled a chain (its q belongs to that chain alone)."""
        if not self.branch or copied is None or drafted.q is not None:
            return drafted
        copy = tuple(copied.candidates[0])
        if any(tuple(c[: len(copy)]) == copy for c in drafted.candidates):
            return drafted
        n = len(drafted.candidates)
        return replace(
            drafted,
            candidates=(*drafted.candidates, copy),
            shape=None,
            source=replace(drafted.source, origins=(self.origin,) * n + (copied.source.origin,)),
        )

    def observe(self, verdict: Verdict) -> None:
        seconds = time.perf_counter() - self.began  # this step's drafting and verification
        self.tokens[self.chosen].add(verdict.accepted + 1)
        self.seconds[MODEL if self.chosen == MODEL else "lookup"].add(seconds)
        if self.chosen == MODEL:
            self.model.observe(verdict)
        else:
            self.lookup.observe(verdict)
            forget = getattr(self.model, "forget", None)  # a draft model drops the draft it keeps in its cache
            if forget is not None and self.with_model:  # (a model side left out never started)
                forget()


ORIGINS = {"draft": MODEL, "eagle": HEAD}  # the model side's name on screen, by hybrid_model


class HybridOptions(Options):
    hybrid_window: int = option(
        256,
        "hybrid draft window",
        "the most prompt tokens the hybrid's draft model reads (its "
        "first quarter from the prompt's opening, the rest from its end; 0: all): the lookup "
        "copies from the whole prompt, so a long one need not cost the draft its prefill",
        low=0,
        high=8192,
    )
    hybrid_model: str = option(
        "draft",
        "hybrid's model drafter",
        "what drafts where the lookup has no long match: "
        "the draft model (a tree of its top tokens) or the target's EAGLE head (its dynamic "
        "tree, read from the target's own features; no draft model needed)",
        choices=tuple(ORIGINS),
    )
    hybrid_branch: str = option(
        "auto",
        "hybrid's copy branch",
        "where the model drafts a tree and the lookup also found a copy: copy (its best continuation goes along as "
        "one more branch, one forward verifies both: more tokens per forward, for a wider forward), none, or auto "
        "(copy on a GPU, where the wider forward costs almost nothing; none on a CPU, where it costs about what the "
        "copy brings)",
        choices=("auto", "copy", "none"),
    )
    eagle: object = shared_option(EagleOptions, "eagle")  # the EAGLE head's location, for hybrid_model eagle


def _build(options: HybridOptions, ctx):
    if options.hybrid_model == "eagle":  # the head's dynamic tree at EAGLE's own defaults
        model = EAGLE.build(EagleOptions(eagle=options.eagle), ctx)
    else:  # the draft model drafts its tree, the shape measured best in the hybrid
        model = build_draft_model(DraftOptions(draft_tree="tree", draft_window=options.hybrid_window), ctx)
    lookup = SuffixOptions()  # suffix decoding at its own defaults
    return HybridDrafter(
        SuffixDrafter(lookup.suffix_factor, lookup.suffix_nodes, lookup.suffix_runs, ctx.memory, ctx.target.eos_ids),
        model,
        ORIGINS[options.hybrid_model],
        branch=rides_beside(options.hybrid_branch, ctx.target.device),
    )


def rides_beside(choice: str, device) -> bool:
    """Whether the copy goes along as a branch of the model's tree: asked for, or auto on a GPU."""
    return choice == "copy" or (choice == "auto" and torch.device(device).type == "cuda")


def _precheck(options: HybridOptions, target_name: str) -> None:
    if options.hybrid_model == "eagle":
        EAGLE.check_for(EagleOptions(eagle=options.eagle), target_name)


KIND = Recipe(
    "hybrid",
    HybridOptions,
    _build,
    Listing(
        "hybrid: lookup or a model drafter",
        "each step, a copy from the prompt, this output or "
        "earlier runs where its match promises more tokens per second, the draft model's (or the EAGLE "
        "head's) tree otherwise",
        describe=lambda o: f"hybrid: lookup or {ORIGINS[o.hybrid_model]}",
        order=12,
        preferred=(("gamma", 8), ("adaptive", True)),
        counterpart="transformers assisted",
        lookup=True,
        # the family suite, whole-call tok/s, medians of 3, AMX Xeon, 2026-12-03 (docs/benchmarks.md)
        best_for=(FamilyBest("math", 8, adaptive=True),),  # 6.06 (the draft model adaptive 5.80)
    ),
    needs_draft=lambda o: o.hybrid_model == "draft",
    precheck=_precheck,
    remembers=True,
    unbatched="its model would draft row by row",
    serving=Serving(  # the draft model is its nearest everywhere: each engine runs one drafting method at a time
        transformers=DRAFT_MODEL.as_nearest("the hybrid also copies from the text where a lookup matches"),
        vllm=DRAFT_MODEL.as_nearest(
            "vLLM runs one method per deployment; it cannot switch between a lookup and a model per step"
        ),
        sglang=DRAFT_MODEL.as_nearest(
            "SGLang runs one algorithm per server: the draft model alone, without the lookup's copies"
        ),
        llama_cpp=LlamaSpecType("draft-simple", weights=PAIR_DRAFT, with_lookup=True),
    ),
)
