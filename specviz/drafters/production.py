"""Take it to production: a drafter as specviz ran it, as the settings that run it in transformers (a runnable
`generate(...)` snippet), vLLM (`--speculative-config`) and SGLang (`--speculative-*` flags). Where an engine has no
such method, the nearest setting it has and what that gives up. Every key is spelled as the engine's own documentation
spells it; docs/production.md lists each with the page it came from. Pure Python."""

import json
from dataclasses import asdict, dataclass

from ..settings import Settings
from .vllm_methods import METHODS, NOT_IN_VLLM

ENGINES = ("transformers", "vLLM", "SGLang")
MAX_NGRAM = 8  # n-gram lookup's longest match (ngram.MAX_NGRAM; held equal by a test: this module stays torch-free)


@dataclass(frozen=True)
class EngineSetting:
    engine: str  # one of ENGINES
    kind: str  # "python" (a snippet), "json" (vLLM's --speculative-config object), "flags" (a command line's)
    text: str  # "" where the engine has nothing near
    nearest: str = ""  # "" when it runs specviz's drafter as specviz ran it; else what this setting gives up


KEYS = ("engine", "kind", "text", "nearest")


@dataclass(frozen=True)
class Handoff:
    """One drafter's settings for every engine."""

    name: str  # the lane as specviz names it ("draft", "draft@4")
    drafter: str
    settings: tuple[EngineSetting, ...]

    def to_json(self) -> dict:
        return {"name": self.name, "drafter": self.drafter, "engines": [asdict(s) for s in self.settings]}

    @staticmethod
    def from_json(data: dict) -> "Handoff":
        listed = data.get("engines")
        engines = tuple(
            EngineSetting(**{k: str(e.get(k, "")) for k in KEYS})
            for e in (listed if isinstance(listed, list) else ())
            if isinstance(e, dict)
        )
        return Handoff(str(data.get("name", "")), str(data.get("drafter", "")), engines)


@dataclass(frozen=True)
class Ran:
    """What specviz ran: the drafter, its settings and options, the models as they are loaded elsewhere (a Hub id
    or a folder), and, where an Under load sweep measured one, vLLM's draft length per concurrency range."""

    drafter: str
    settings: Settings
    options: object = None
    target: str = "TARGET"
    draft: str = ""
    prompt: str = "Write a Python function that reverses a string."
    chat: bool = True
    same_vocab: bool = True
    per_batch_size: tuple = ()  # ([first, last, γ], ...) from an Under load sweep
    name: str = ""  # the lane's name, where it is not the drafter's


def recording(handoffs) -> dict:
    """What a trace's `extra` carries of its handoffs (read back by `recorded`)."""
    return {"production": [h.to_json() for h in handoffs]}


def recorded(extra: dict) -> tuple[Handoff, ...]:
    """The handoffs a trace recorded (its `extra`), skipping what is not one (a trace from before, or edited)."""
    found = extra.get("production") if isinstance(extra, dict) else None
    return tuple(Handoff.from_json(h) for h in found if isinstance(h, dict)) if isinstance(found, list) else ()


def handoff(ran: Ran) -> Handoff:
    return Handoff(ran.name or ran.drafter, ran.drafter, (_transformers(ran), _vllm(ran), _sglang(ran)))


def _opt(ran: Ran, name: str, default=None):
    return getattr(ran.options, name, default)


def _shape(ran: Ran) -> str:
    """What specviz's own drafting adds that a chain of fixed length does not: a tree, adaptive γ."""
    shapes = [_opt(ran, f"{name}_tree") for name in ("draft", "eagle", "medusa", "dflash")]
    parts = []
    if any(shape not in (None, "chain") for shape in shapes) or ran.drafter == "suffix":
        parts.append("specviz verifies a tree of candidates in one forward; this drafts one chain")
    return "; ".join(filter(None, [*parts, _adaptive_only(ran)]))


# -- transformers --------------------------------------------------------------------------------------------------


def _transformers(ran: Ran) -> EngineSetting:
    d, s = ran.drafter, ran.settings
    schedule = "heuristic" if s.adaptive else "constant"
    if d in ("draft", "hybrid") and ran.draft:
        args = [
            "assistant_model=assistant",
            f"num_assistant_tokens={s.gamma}",
            f'num_assistant_tokens_schedule="{schedule}"',
        ]
        if not ran.same_vocab:
            args += ["tokenizer=tokenizer", "assistant_tokenizer=assistant_tokenizer"]
        nearest = _shape(ran) if d == "draft" else "the hybrid also copies from the text where a lookup matches"
        return EngineSetting("transformers", "python", _snippet(ran, args, with_draft=True), nearest)
    if d in ("ngram", "suffix", "history"):
        args = [f"prompt_lookup_num_tokens={s.gamma}", f"max_matching_ngram_size={MAX_NGRAM}"]
        shortest = _opt(ran, "ngram_min", 1)
        gives_up = {
            "ngram": f"transformers matches down to 1 token (specviz: {shortest})" if shortest > 1 else "",
            "suffix": "prompt lookup copies from this request only, one chain: no tree, no earlier requests",
            "history": "prompt lookup copies from this request only: no earlier requests' continuations",
        }[d]
        gives_up = "; ".join(filter(None, [gives_up, _adaptive_only(ran)]))
        return EngineSetting("transformers", "python", _snippet(ran, args), gives_up)
    if d == "oracle":
        return EngineSetting("transformers", "python", "", "the oracle is a stand-in with a set acceptance")
    return EngineSetting(
        "transformers",
        "python",
        _snippet(ran, []),
        f"transformers' generate has no {d} heads: plain decoding (the same tokens, none of the speedup)",
    )


def _snippet(ran: Ran, args: list[str], with_draft: bool = False) -> str:
    """A script that loads the models and writes the greedy (or sampled) continuation, the way specviz did."""
    s = ran.settings
    sampling = (
        ["do_sample=False"]
        if s.greedy
        else ["do_sample=True", f"temperature={s.temperature}", f"top_k={s.top_k}", f"top_p={s.top_p}"]
    )
    lines = [
        "import torch",
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        "",
        f"torch.manual_seed({s.seed})",
        f"tokenizer = AutoTokenizer.from_pretrained({ran.target!r})",
        f'model = AutoModelForCausalLM.from_pretrained({ran.target!r}, dtype="auto")',
    ]
    if with_draft:
        lines.append(f'assistant = AutoModelForCausalLM.from_pretrained({ran.draft!r}, dtype="auto")')
        if not ran.same_vocab:
            lines.append(f"assistant_tokenizer = AutoTokenizer.from_pretrained({ran.draft!r})")
    lines.append(f"prompt = {ran.prompt!r}")
    if ran.chat:
        lines.append(
            'inputs = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], '
            'add_generation_prompt=True, return_tensors="pt", return_dict=True)'
        )
    else:
        lines.append('inputs = tokenizer(prompt, return_tensors="pt")')
    call = ", ".join(["**inputs", *args, *sampling, f"max_new_tokens={s.max_new_tokens}"])
    lines += [
        f"output = model.generate({call})",
        'new_tokens = output[0, inputs["input_ids"].shape[1] :]',
        "print(tokenizer.decode(new_tokens, skip_special_tokens=True))",
    ]
    return "\n".join(lines)


# -- vLLM ----------------------------------------------------------------------------------------------------------


VLLM_NEAREST = {"history": "suffix", "hybrid": "draft"}  # the drafter vLLM runs in their place


def vllm_config(ran: Ran) -> dict | None:
    """vLLM's --speculative-config object for what specviz ran; None where vLLM has no such method."""
    d, s = ran.drafter, ran.settings
    method = METHODS.get(d)
    if method is None:
        return None
    config = {"method": method, "num_speculative_tokens": s.gamma}
    if method == "draft_model":
        config["model"] = ran.draft or "DRAFT"
    elif method == "ngram":
        config.update(prompt_lookup_min=_opt(ran, "ngram_min", 1), prompt_lookup_max=MAX_NGRAM)
    elif method == "suffix" and ran.options is not None:  # else vLLM's defaults
        config["suffix_decoding_max_spec_factor"] = float(_opt(ran, "suffix_factor"))
        config["suffix_decoding_max_cached_requests"] = _opt(ran, "suffix_runs")
    elif method in ("eagle", "medusa"):
        config["model"] = _opt(ran, method) or f"{method.upper()}_HEADS"
    if ran.per_batch_size:  # vLLM drafts the most of the table's lengths; each range gets its own
        config["num_speculative_tokens"] = max(1, max(k for *_, k in ran.per_batch_size))
        config["num_speculative_tokens_per_batch_size"] = [list(r) for r in ran.per_batch_size]
    return config


def _vllm(ran: Ran) -> EngineSetting:
    d, s = ran.drafter, ran.settings
    config = vllm_config(ran)
    if config is None:
        nearest = VLLM_NEAREST.get(d)
        if nearest is None:
            return EngineSetting("vLLM", "json", "", NOT_IN_VLLM.get(d, "vLLM has no such method"))
        stand_in = Ran(nearest, s, None, ran.target, ran.draft)
        return EngineSetting("vLLM", "json", _vllm(stand_in).text, NOT_IN_VLLM[d])
    flag = f"vllm serve {ran.target} --speculative-config '{json.dumps(config)}'"
    return EngineSetting("vLLM", "json", flag, _shape(ran))


def _adaptive_only(ran: Ran) -> str:
    return f"specviz chose γ per step (up to {ran.settings.gamma}) from measured costs" if ran.settings.adaptive else ""


# -- SGLang --------------------------------------------------------------------------------------------------------

SGLANG = {"draft": "STANDALONE", "eagle": "EAGLE", "dflash": "DFLASH", "ngram": "NGRAM"}
SGLANG_NEAREST = {
    "hybrid": ("draft", "SGLang runs one algorithm per server: the draft model alone, without the lookup's copies"),
    "suffix": ("ngram", "SGLang's n-gram cache (earlier requests' tokens too), not a suffix tree"),
    "history": ("ngram", "SGLang's n-gram cache of earlier tokens, not specviz's earlier continuations"),
    "medusa": (None, "SGLang has no Medusa heads: an EAGLE head trained for the target is its nearest"),
    "oracle": (None, "the oracle is a stand-in with a set acceptance"),
}


def _sglang(ran: Ran) -> EngineSetting:
    d, s = ran.drafter, ran.settings
    algorithm = SGLANG.get(d)
    if algorithm is None:
        stand_in, why = SGLANG_NEAREST.get(d, (None, "SGLang has no such algorithm"))
        if stand_in is None:
            return EngineSetting("SGLang", "flags", "", why)
        return EngineSetting("SGLang", "flags", _sglang(Ran(stand_in, s, None, ran.target, ran.draft)).text, why)
    flags = [f"python -m sglang.launch_server --model-path {ran.target}", f"--speculative-algorithm {algorithm}"]
    if d == "ngram":
        flags += [
            f"--speculative-num-draft-tokens {s.gamma}",
            f"--speculative-ngram-min-match-window-size {_opt(ran, 'ngram_min', 1)}",
            f"--speculative-ngram-max-match-window-size {MAX_NGRAM}",
        ]
    elif d == "dflash":
        flags += [f"--speculative-draft-model-path {_opt(ran, 'dflash') or 'DFLASH_DRAFT'}"]
        flags += [f"--speculative-num-draft-tokens {s.gamma}"]
    else:
        path = (ran.draft or "DRAFT") if d == "draft" else (_opt(ran, "eagle") or "EAGLE_HEAD")
        flags += [
            f"--speculative-draft-model-path {path}",
            f"--speculative-num-steps {s.gamma}",
            "--speculative-eagle-topk 1",
            f"--speculative-num-draft-tokens {s.gamma + 1}",
        ]
    return EngineSetting("SGLang", "flags", " \\\n  ".join(flags), _shape(ran))


# -- what the nearest gives up -------------------------------------------------------------------------------------


TRANSFORMERS_NEAREST = {"hybrid": "draft", "suffix": "ngram", "history": "ngram"}  # assisted generation, lookup


def stand_in(engine: str, drafter: str) -> str | None:
    """The specviz drafter nearest to what `engine` runs for `drafter` (itself where the engine has it; None: the
    engine decodes plainly), so that a benchmark can measure what taking it there gives up. For transformers, the
    drafter whose transformers counterpart (assisted generation, prompt lookup) the script runs."""
    if engine == "transformers":
        return drafter if drafter in ("draft", "ngram") else TRANSFORMERS_NEAREST.get(drafter)
    if engine == "vLLM":
        return drafter if drafter in METHODS else VLLM_NEAREST.get(drafter)
    return drafter if drafter in SGLANG else SGLANG_NEAREST.get(drafter, (None, ""))[0]
