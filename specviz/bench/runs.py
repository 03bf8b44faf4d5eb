"""One run as the benchmark records it, for specviz and for transformers' generate, and the fastest of several."""

import copy

from ..drafters.registry import decode
from ..events import generated_ids, summarize


def measure(target, prompt_ids, settings, kind="none", draft=None, options=None, memory=None) -> dict:
    """One specviz run: ids, seconds (prefill + decode), its events and metrics. A drafter that remembers runs
    drafts from a copy of `memory`, returned with this run in it, so that a repeated measurement never sees itself."""
    memory = copy.deepcopy(memory)
    events = list(decode(target, prompt_ids, settings, kind, draft, options, memory=memory))
    m = summarize(events)
    return {
        "ids": generated_ids(events),
        "seconds": m.total_s,
        "decode_s": m.decode_s,
        "events": events,
        "alpha": m.acceptance_rate,
        "tau": m.mean_tokens_per_step,
        "memory": memory,
    }


def transformers_run(target, prompt_ids, settings, method=None, gamma=None, draft=None, ngram_max=3, clock=None):
    """transformers' generate: plain (method None), "transformers assisted" (γ, or None for its own default
    schedule) or "transformers prompt lookup" (γ, or None for its recommended 10 tokens and its default n-gram
    size), with the same sampling settings as ours."""
    import torch
    from transformers import GenerationConfig

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
        cfg, default = draft.model.generation_config, GenerationConfig()
        cfg.num_assistant_tokens = gamma or default.num_assistant_tokens
        cfg.num_assistant_tokens_schedule = "constant" if gamma else default.num_assistant_tokens_schedule
        cfg.assistant_confidence_threshold = 0.0 if gamma else default.assistant_confidence_threshold
        kwargs["assistant_model"] = draft.model
        if draft.tokenizer.get_vocab() != target.tokenizer.get_vocab():  # universal assisted decoding
            kwargs.update(tokenizer=target.tokenizer, assistant_tokenizer=draft.tokenizer)
    elif method == "transformers prompt lookup":  # γ None: the setting its documentation recommends (10 tokens)
        kwargs.update(prompt_lookup_num_tokens=gamma or 10, max_matching_ngram_size=ngram_max if gamma else None)
    torch.manual_seed(settings.seed)
    start = clock()
    with torch.inference_mode():
        out = target.model.generate(ids, **kwargs)
    return {"ids": out[0, len(prompt_ids) :].tolist(), "seconds": clock() - start}


def fastest(fns: dict, repeats: int) -> dict:
    """Run every fn `repeats` times, alternating the order, and keep each one's fastest run."""
    runs = {name: [] for name in fns}
    for r in range(repeats):
        for name in list(fns) if r % 2 == 0 else list(fns)[::-1]:
            runs[name].append(fns[name]())
    return {name: min(rs, key=lambda run: run["seconds"]) for name, rs in runs.items()}


def bracketed(opening: dict, closing: dict) -> dict:
    """The opening plain run with the mean of both runs' times: the CPU's speed across the cells between them."""
    mean = lambda key: (opening[key] + closing[key]) / 2  # noqa: E731
    return {**opening, "seconds": mean("seconds"), **({"decode_s": mean("decode_s")} if "decode_s" in opening else {})}


def tps(run) -> float:
    return len(run["ids"]) / run["seconds"]
