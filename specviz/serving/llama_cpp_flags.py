"""A drafter as llama.cpp serves it: `llama-server` with its `--spec-*` flags, as llama.cpp's own documentation
(docs/speculative.md of its source) names them. Models are loaded as llama.cpp users load them: a Hub id as the
repository of its GGUF files (`-hf OWNER/NAME-GGUF`, llama.cpp's default Q4_K_M), a file as itself (`-m FILE`)."""

from .declaration import LlamaSpecType
from .handoff import Ran

# Under adaptive γ a draft model stops where its own probability for the next token falls below this: llama.cpp's
# nearest to specviz's choice of γ from measured costs (its own default, 0, never stops).
P_MIN = 0.75


def model_flag(name: str, flag: str, hub_flag: str) -> str:
    """How llama-server loads `name`: a Hub id's GGUF repository, a .gguf file or folder as it is."""
    if "/" in name and not name.startswith(("/", ".", "~")) and not name.endswith(".gguf"):
        return f"{hub_flag} {name}-GGUF"
    return f"{flag} {name}"


def launch(ran: Ran) -> str:
    """The server command that decodes plainly."""
    return f"llama-server {model_flag(ran.target, '-m', '-hf')}"


def write(ran: Ran, way: LlamaSpecType, own: bool) -> str:
    """The server command for `way`; `own`: the drafter's own type, with its options (else at its defaults)."""
    options = ran.options if own else None
    gamma = ran.settings.gamma
    flags = [launch(ran)]
    if way.weights is not None:
        flags.append(model_flag(way.weights.location(options, ran.draft), "-md", "-hfd"))
    flags.append(f"--spec-type {'ngram-simple,' if way.with_lookup else ''}{way.spec_type}")
    flags.append(f"--spec-draft-n-max {gamma}")
    if way.weights is not None:  # a model drafts: γ always, or (adaptive) until its own confidence falls
        flags += (
            ["--spec-draft-n-min 0", f"--spec-draft-p-min {P_MIN}"]
            if ran.settings.adaptive
            else [f"--spec-draft-n-min {gamma}"]
        )
    if way.window is not None or way.with_lookup:
        shortest = way.window.shortest_for(options) if way.window is not None else 1
        flags += [f"--spec-ngram-simple-size-n {shortest}", f"--spec-ngram-simple-size-m {gamma}"]
    if way.spec_type == "ngram-mod":  # its drafts may run from one token to γ; its match length stays llama.cpp's
        flags += ["--spec-ngram-mod-n-min 1", f"--spec-ngram-mod-n-max {gamma}"]
    return " \\\n  ".join(flags)


def gives_up(way, options) -> str:
    if isinstance(way, LlamaSpecType) and way.with_lookup:
        return "llama.cpp takes the lookup's draft wherever it has one; specviz picks per step what promises more"
    return getattr(way, "note", "")
