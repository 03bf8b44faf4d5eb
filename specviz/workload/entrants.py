"""Which drafters a workload runs, and how: each chosen drafter with its options and its settings (the γ and adaptive
choice it measured best, unless the caller fixes γ for all), or the reason it cannot run with these models. The CLI
and the app's server both ask here, before any model is loaded."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..drafters.kinds import DrafterKind, Options
from ..drafters.registry import kind, kinds
from ..errors import InvalidRequest, SpecvizError
from ..settings import Settings, mode_text
from .view import Contender

BEST = "each drafter's measured best γ"


@dataclass(frozen=True)
class Entrant:
    contender: Contender
    settings: Settings | None = None  # None: it cannot run (contender.note says why)
    options: Options | None = None

    @property
    def name(self) -> str:
        return self.contender.name


def drafter_names(text: str | Sequence[str] | None) -> list[str]:
    """Drafter names from a comma-separated list (or a list), every one checked; none given: every drafter offered."""
    offered = [k.name for k in kinds(menu_only=True)]
    if text is None or text == "":
        return offered
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    unknown = [n for n in names if n not in offered]
    if unknown:
        raise InvalidRequest(f"unknown drafter {unknown[0]!r}; drafters: {', '.join(offered)}")
    if not names:
        raise InvalidRequest("no drafters chosen")
    return list(dict.fromkeys(names))


def entrants(
    names: Sequence[str],
    base: Settings,
    fixed_gamma: bool,
    options_of: Callable[[DrafterKind], Options],
    target_name: str,
    has_draft: bool,
) -> list[Entrant]:
    """Every drafter named, in menu order: its settings (base, or base with the γ and adaptive choice it measured
    best), its options (`options_of`) and its mode line; one that needs a draft model when there is none, or whose
    checks refuse the target, gets the reason instead."""
    out = []
    for k in sorted((kind(n) for n in names), key=lambda k: k.order):
        settings = base if fixed_gamma else best_settings(k, base)
        try:
            options = options_of(k)
            if k.draft_needed(options) and not has_draft:
                raise InvalidRequest("it needs a draft model (--draft)")
            k.check_for(options, target_name)
        except SpecvizError as exc:
            out.append(Entrant(Contender(k.name, k.label, f"not available: {exc}")))
            continue
        out.append(Entrant(Contender(k.name, mode_words(k.words(options), settings)), settings, options))
    return out


def mode_words(drafter_words: str, settings: Settings) -> str:
    """A drafter's mode line as the race says it, with its γ: in a workload each may run at its own."""
    return mode_text(drafter_words, settings) + ("" if settings.adaptive else f", γ = {settings.gamma}")


def best_settings(k: DrafterKind, base: Settings) -> Settings:
    """`base` with the γ and adaptive choice the drafter measured fastest with: its declared preference, else the
    settings' own default (γ 4, fixed), as `generate` runs it when no γ is given. Never the γ `base` happens to
    carry (the app's sidebar holds the chosen drafter's), so "each drafter's best" means one thing in the app and
    the CLI."""
    return replace(base, gamma=k.prefers("gamma", Settings.gamma), adaptive=k.prefers("adaptive", Settings.adaptive))


def setting_words(fixed_gamma: bool, base: Settings) -> str:
    if not fixed_gamma:
        return BEST
    return f"γ = {base.gamma} for every drafter" + (", adaptive" if base.adaptive else ", fixed")
