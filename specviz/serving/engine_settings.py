"""What specviz ran, as each serving engine's setting: the kind's own way there, written with its options; or, where
the engine has no such method, the stand-in's setting (or none) and what that gives up; or, where the kind declares
nothing for an engine, that it has no equivalent there. What every engine's single chain of fixed length gives up
beside specviz (a tree, adaptive γ) is said here once for all three."""

from dataclasses import dataclass
from types import ModuleType

from . import llama_cpp_flags, sglang_flags, transformers_script, vllm_setting
from .declaration import Nearest, Serving
from .handoff import EngineSetting, Handoff, Ran

PLAIN_DECODING = "plain decoding (the same tokens, none of the speedup)"


@dataclass(frozen=True)
class _Engine:
    name: str  # as Serving.declared takes it
    kind: str  # as EngineSetting.kind
    # launch(ran) -> plain decoding's text; write(ran, way, own) -> the way's text;
    # gives_up(its own way, options) -> what it loses beyond the chain
    writer: ModuleType


_ENGINES = (
    _Engine("transformers", "python", transformers_script),
    _Engine("vLLM", "json", vllm_setting),
    _Engine("SGLang", "flags", sglang_flags),
    _Engine("llama.cpp", "flags", llama_cpp_flags),
)
ENGINES = tuple(e.name for e in _ENGINES)


def handoff(ran: Ran) -> Handoff:
    """The drafter's setting in every engine, and where specviz ran it among them."""
    settings = tuple(_setting(engine, ran) for engine in _ENGINES)
    return Handoff(ran.name or ran.drafter, ran.drafter, settings, ran_on(ran))


def ran_on(ran: Ran) -> str:
    """Which of the engines below runs what specviz ran, from its runtime: the same engine, or none of them."""
    if not ran.runtime:
        return ""
    if ran.runtime_engine in ENGINES:
        return f"specviz ran it on {ran.runtime}: the {ran.runtime_engine} setting below runs it in that same engine"
    return (
        f"specviz ran it on {ran.runtime}, which no serving engine runs: no equivalent of the runtime; the settings "
        "below run the same drafter in each engine"
    )


def _setting(engine: _Engine, ran: Ran) -> EngineSetting:
    declared = ran.serving.declared(engine.name)
    if declared is None:
        return EngineSetting(engine.name, engine.kind, "", no_equivalent(engine.name, ran.drafter))
    if isinstance(declared, Nearest):
        return _nearest(engine, ran, declared)
    notes = [_tree(ran), engine.writer.gives_up(declared, ran.options), _adaptive(ran, declared)]
    return EngineSetting(engine.name, engine.kind, engine.writer.write(ran, declared, True), _joined(notes))


def _nearest(engine: _Engine, ran: Ran, nearest: Nearest) -> EngineSetting:
    """The stand-in's setting, at its defaults, with what it gives up; plain decoding; or nothing, and why."""
    if nearest.plain:
        return EngineSetting(
            engine.name, engine.kind, engine.writer.launch(ran), f"{nearest.gives_up}: {PLAIN_DECODING}"
        )
    way = nearest.of.declared(engine.name) if nearest.of is not None else None
    if way is None or isinstance(way, Nearest):
        return EngineSetting(engine.name, engine.kind, "", nearest.gives_up)
    text = engine.writer.write(ran, way, False)
    return EngineSetting(engine.name, engine.kind, text, _joined([nearest.gives_up, _adaptive(ran, way)]))


def no_equivalent(engine: str, drafter: str) -> str:
    return f"no equivalent in {engine}: specviz's {drafter} drafter names no setting there, nor a nearest one"


def why_none(engine: str, ran: Ran) -> str:
    """Why `engine` has no method of the drafter's own (what its declaration says, or that it says nothing)."""
    declared = ran.serving.declared(engine)
    return declared.gives_up if isinstance(declared, Nearest) else no_equivalent(engine, ran.drafter)


def stand_in(engine: str, drafter: str, serving: Serving) -> str | None:
    """The specviz drafter nearest to what `engine` runs for `drafter` (itself where the engine has it; None: the
    engine decodes plainly, or runs nothing), so that a benchmark can measure what taking it there gives up. For
    transformers, the drafter whose counterpart (assisted generation, prompt lookup) the script runs."""
    declared = serving.declared(engine)
    if declared is None:
        return None
    return declared.stand_in if isinstance(declared, Nearest) else drafter


def _tree(ran: Ran) -> str:
    return (
        "specviz checked several candidate continuations per step; this engine checks one"
        if ran.serving.drafts_a_tree(ran.options)
        else ""
    )


def _adaptive(ran: Ran, way=None) -> str:
    """What the engine makes of specviz's adaptive γ: vLLM's adaptive verification prices each step too (where it
    serves the method); llama.cpp stops a model's draft at its own confidence; the others draft γ every step."""
    if not ran.settings.adaptive:
        return ""
    chose = f"specviz chose γ per step (up to {ran.settings.gamma}) from measured costs"
    if getattr(way, "adaptive_verification", False):
        return chose + "; vLLM's adaptive verification sizes each step's draft from its own profiled costs"
    if getattr(way, "spec_type", None) and getattr(way, "weights", None) is not None:
        return chose + f"; llama.cpp stops a draft where its own probability falls below {llama_cpp_flags.P_MIN}"
    return chose


def _joined(notes) -> str:
    return "; ".join(filter(None, notes))
