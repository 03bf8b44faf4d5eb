"""One run as the benchmark records it, for specviz and for transformers' generate, and the median of several."""

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from transformers import GenerationConfig

from ..events import generated_ids, summarize
from ..runs import generate_named


@dataclass(frozen=True)
class Run:
    """One run: the ids it wrote and its seconds, prefill included. specviz's runs also keep their decode seconds,
    events, α and τ, and (for a drafter that remembers runs) the memory with this run in it."""

    ids: list[int]
    seconds: float
    decode_s: float | None = None
    events: tuple = ()
    alpha: float | None = None
    tau: float | None = None
    memory: object = None  # a RunMemory
    spread: tuple[float, float] | None = None  # the slowest and fastest tokens/s of the repeats it is the median of

    @property
    def tps(self) -> float:
        return len(self.ids) / self.seconds

    @property
    def low(self) -> float:
        return self.spread[0] if self.spread else self.tps

    @property
    def high(self) -> float:
        return self.spread[1] if self.spread else self.tps


@dataclass(frozen=True)
class Sides:
    """specviz's run and transformers' run of one cell or of plain decoding (theirs: None where not raced)."""

    ours: Run
    theirs: Run | None = None


def measure(target, prompt_ids, settings, kind="none", draft=None, options=None, memory=None) -> Run:
    """One specviz run. A drafter that remembers runs drafts from a copy of `memory`, returned with this run in it,
    so that a repeated measurement never sees itself."""
    memory = copy.deepcopy(memory)
    events = tuple(generate_named(target, prompt_ids, settings, kind, draft, options, memory=memory, explain=False))
    m = summarize(events)
    return Run(generated_ids(events), m.total_s, m.decode_s, events, m.acceptance_rate, m.mean_tokens_per_step, memory)


def transformers_run(target, prompt_ids, settings, method=None, gamma=None, draft=None, ngram_max=3, clock=None) -> Run:
    """transformers' generate: plain (method None), "transformers assisted" (γ, or None for its own default
    schedule) or "transformers prompt lookup" (γ, or None for its recommended 10 tokens and its default n-gram
    size), with the same sampling settings as ours."""

    ids = torch.tensor([prompt_ids], device=target.device)
    kwargs = dict(
        max_new_tokens=settings.max_new_tokens,
        attention_mask=torch.ones_like(ids),
        do_sample=not settings.greedy,
        repetition_penalty=1.0,
    )
    if not settings.greedy:
        kwargs.update(temperature=settings.temperature, top_k=settings.top_k, top_p=settings.top_p)
    if method == "transformers assisted":
        cfg = draft.model.generation_config
        default = GenerationConfig()
        cfg.num_assistant_tokens = gamma or default.num_assistant_tokens
        cfg.num_assistant_tokens_schedule = "constant" if gamma else default.num_assistant_tokens_schedule
        cfg.assistant_confidence_threshold = 0.0 if gamma else default.assistant_confidence_threshold
        kwargs["assistant_model"] = draft.model
        if draft.tokenizer.get_vocab() != target.tokenizer.get_vocab():  # universal assisted decoding
            kwargs.update(tokenizer=target.tokenizer, assistant_tokenizer=draft.tokenizer)
    elif method == "transformers prompt lookup":  # γ None: the setting its documentation recommends (10 tokens)
        kwargs.update(prompt_lookup_num_tokens=gamma or 10, max_matching_ngram_size=ngram_max if gamma else None)
    torch.manual_seed(settings.seed)
    forwards = []  # the target's forwards, to count tokens per forward as specviz's τ does
    hook = target.model.register_forward_pre_hook(lambda module, args: forwards.append(1))
    start = clock()
    try:
        with torch.inference_mode():
            out = target.model.generate(ids, **kwargs)
    finally:
        seconds = clock() - start
        hook.remove()
    new = out[0, len(prompt_ids) :].tolist()
    return Run(new, seconds, tau=len(new) / max(1, len(forwards) - 1))  # the prefill's forward is not a step


def typical(ours: Callable[[], Run], theirs: Callable[[], Run] | None, repeats: int) -> Sides:
    """Run each side `repeats` times, alternating which goes first, and keep each one's median run (the lower
    middle one of an even count), with the spread of its repeats' tokens/s."""
    sides = [ours] if theirs is None else [ours, theirs]
    runs = [[] for _ in sides]
    for r in range(repeats):
        for i in range(len(sides)) if r % 2 == 0 else reversed(range(len(sides))):
            runs[i].append(sides[i]())
    kept = []
    for rs in runs:
        ordered = sorted(rs, key=lambda run: run.seconds)
        kept.append(replace(ordered[(len(ordered) - 1) // 2], spread=(ordered[-1].tps, ordered[0].tps)))
    return Sides(*kept)


def bracketed(opening: Run, closing: Run) -> Run:
    """The opening plain run with the mean of both runs' times: the CPU's speed across the cells between them; its
    spread covers both."""
    decode_s = None if opening.decode_s is None else (opening.decode_s + closing.decode_s) / 2
    spread = (min(opening.low, closing.low), max(opening.high, closing.high))
    return replace(opening, seconds=(opening.seconds + closing.seconds) / 2, decode_s=decode_s, spread=spread)


def bracketed_sides(opening: Sides, closing: Sides) -> Sides:
    """Both libraries' plain runs, each bracketed (bracketed)."""
    theirs = None if opening.theirs is None else bracketed(opening.theirs, closing.theirs)
    return Sides(bracketed(opening.ours, closing.ours), theirs)
