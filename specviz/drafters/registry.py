"""The registry: every module of this package that declares a KIND (a contract.Recipe) is a drafter kind.

Adding a drafter is one new module here (and its tests); the CLI, the app and the benchmark list what this finds.
The package is scanned once per folder it is found in: its modules do not change while the program runs.
"""

import functools
import importlib
from collections.abc import Iterator

from ..errors import InvalidRequest
from ..paths import declared_in
from ..serving.declaration import Serving
from .contract import DraftContext, EachRow, Recipe
from .listing import FamilyBest
from .options import OptionSpec

NO_DRAFTER = "none"  # the drafter choice of the plain side: no drafter at all
_NOT_KINDS = {"contract", "listing", "options", "registry"}


def kinds(menu_only: bool = False) -> tuple[Recipe, ...]:
    """Every declared kind in menu order (menu_only: those offered to users, not the benchmark's tools)."""
    every = _declared(tuple(importlib.import_module(__package__).__path__))
    return tuple(k for k in every if k.listing.menu or not menu_only)


@functools.cache
def _declared(folders: tuple[str, ...]) -> tuple[Recipe, ...]:
    """Every kind the package's modules declare, in menu order (found once per folder the package is in)."""
    found = declared_in(__package__, folders, "KIND", Recipe, _NOT_KINDS, NO_DRAFTER)
    _check_option_names(found.values())
    return tuple(sorted(found.values(), key=lambda k: (k.listing.order, k.name)))


def _check_option_names(all_kinds) -> None:
    """Options share one namespace (CLI flags, API parameters), so two kinds may declare the same one only as one
    option (kinds.shared_option), and never one the screen shows (one control would serve two panels)."""
    owner: dict[str, tuple[str, object]] = {}
    for kind in all_kinds:
        for spec in kind.options.specs():
            for key in (spec.name, spec.cli_flag):
                first, declared = owner.setdefault(key, (kind.name, spec))
                if first != kind.name and (declared != spec or spec.app):
                    raise RuntimeError(f"drafters {first!r} and {kind.name!r} both declare option {key!r}")


def kind(name: str) -> Recipe:
    for k in kinds():
        if k.name == name:
            return k
    names = ", ".join(k.name for k in kinds(menu_only=True))
    raise InvalidRequest(f"unknown drafter {name!r}; choose one of: {NO_DRAFTER}, {names}")


def serving_of(name: str) -> Serving:
    """What kind `name` is in the serving engines; a name no kind declares (an older record's) declares nothing."""
    return next((k.serving for k in kinds() if k.name == name), Serving())


def option_owners() -> Iterator[tuple[tuple[Recipe, ...], object]]:
    """(the kinds that take it, its spec) for every option of the kinds offered to users, each option once."""
    taking: dict[str, tuple[list, object]] = {}
    for k in kinds(menu_only=True):
        for spec in k.options.specs():
            taking.setdefault(spec.name, ([], spec))[0].append(k)
    for takers, spec in taking.values():
        yield tuple(takers), spec


def default_kind() -> Recipe:
    """The drafter a caller that names none starts with (the app's first race): the first on the menu."""
    return kinds(menu_only=True)[0]


def best_for(family: str) -> tuple[Recipe, FamilyBest] | None:
    """The drafter the benchmark measured fastest on a prompt family, with its settings there; None if none was."""
    for k in kinds(menu_only=True):
        for best in k.listing.best_for:
            if best.family == family:
                return k, best
    return None


def pair_model_options() -> tuple[OptionSpec, ...]:
    """The options that say where a model a drafter loads is found (heads for the target), which a pair brings."""
    return tuple(spec for _, spec in option_owners() if spec.pair_model)


def published_options(target: str) -> tuple[tuple[str, str], ...]:
    """(option, location) for every model published for `target` that a drafter loads: what a preset pair brings."""
    return tuple(
        (spec.name, dict(spec.published)[target]) for spec in pair_model_options() if target in dict(spec.published)
    )


def build_drafter(name: str, settings, generator, target, draft=None, options=None, memory=None):
    """The drafter `name` for one generation of `target` (a LoadedModel); None for plain decoding. `options` is the
    kind's Options, or a mapping that may hold other kinds' options too. `memory`: the caller's RunMemory, for a
    kind that drafts from earlier runs (others ignore it)."""
    if name == NO_DRAFTER:
        return None
    k = kind(name)
    if target is not None:  # the runtime's refusal, whoever asks (the app, a benchmark)
        k.refuse_on(k.parse(options), target.runtime)
    return k.build(k.parse(options), DraftContext(target, settings, generator, draft, memory))


def build_row_drafting(
    name: str, settings, generators: list, target, draft=None, options=None, memory=None, concurrent: bool = False
):
    """The drafting of a batch of len(generators) rows (row i drawing from generators[i]): the kind's drafter for a
    batch where it declares one (its forwards serve every row), else one drafter per row side by side; None for
    plain decoding. `concurrent`: the batch's drafter even for one row (a level of a concurrency sweep)."""
    if name == NO_DRAFTER:
        return None
    k = kind(name)
    options = k.parse(options)
    if target is not None:
        k.refuse_on(options, target.runtime)
    if k.unbatched and (len(generators) > 1 or concurrent):
        raise InvalidRequest(f"{name} does not decode a batch yet: {k.unbatched}")
    if k.build_batch is not None and (len(generators) > 1 or concurrent):
        return k.build_batch(options, DraftContext(target, settings, generators, draft, memory))
    return EachRow([k.build(options, DraftContext(target, settings, g, draft, memory)) for g in generators])
