"""A drafter as vLLM serves it: `vllm serve TARGET --speculative-config '{...}'`, the object's fields as vLLM's
documentation names them (`vllm.config.speculative.SpeculativeConfig`; "Dynamic Speculative Decoding" for the draft
length per batch size)."""

import json

from .declaration import Serving, VllmMethod
from .handoff import Ran


def launch(ran: Ran) -> str:
    """The serve command that decodes plainly."""
    return f"vllm serve {ran.target}"


def write(ran: Ran, way: VllmMethod, own: bool) -> str:
    """The serve command for `way`; `own`: the drafter's own method, read with its options (else at its defaults)."""
    return f"{launch(ran)} --speculative-config '{json.dumps(speculative_config(ran, way, own))}'"


def gives_up(way, options) -> str:
    return getattr(way, "note", "")


def in_vllm(serving: Serving) -> bool:
    """Whether a kind (by its declaration) is a method of vLLM's own."""
    return isinstance(serving.vllm, VllmMethod)


def vllm_config(ran: Ran) -> dict | None:
    """vLLM's --speculative-config object for what specviz ran; None where vLLM has no such method."""
    return speculative_config(ran, ran.serving.vllm, own=True) if in_vllm(ran.serving) else None


def speculative_config(ran: Ran, way: VllmMethod, own: bool) -> dict:
    options = ran.options if own else None
    config = {"method": way.method, "num_speculative_tokens": ran.settings.gamma}
    if way.weights is not None:
        config["model"] = way.weights.location(options, ran.draft)
    if way.window is not None:
        config.update(prompt_lookup_min=way.window.shortest_for(options), prompt_lookup_max=way.window.longest)
    if way.cache is not None and options is not None:  # else vLLM's defaults
        config["suffix_decoding_max_spec_factor"] = float(way.cache.spec_factor(options))
        config["suffix_decoding_max_cached_requests"] = way.cache.cached_requests(options)
    if ran.settings.adaptive and way.adaptive_verification and not ran.per_batch_size:  # priced per step, as specviz
        config["enable_adaptive_verification"] = True
    if own and ran.per_batch_size:  # vLLM drafts the most of the table's lengths; each range gets its own
        config["num_speculative_tokens"] = max(1, max(k for *_, k in ran.per_batch_size))
        config["num_speculative_tokens_per_batch_size"] = [list(r) for r in ran.per_batch_size]
    return config
