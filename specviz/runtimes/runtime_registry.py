"""The registry: every module or package of runtimes/ that declares a RUNTIME (a runtime.Runtime) is a runtime, found
as the drafters' registry finds a kind. The CLI's --runtime, the app's Runtime choice, the auto choice, a race on
every runtime and the production block all read them from here.

`choose` answers which runtime computes a pair: the one named (or why it cannot, in one line), or, for `auto`, the
one whose measured costs promise the most tokens/s among those that can run the pair here.
"""

import functools
import importlib
from dataclasses import replace

from ..errors import InvalidRequest
from ..models.device import resolve_device
from ..paths import declared_in
from .choice import RuntimeChoice, choose_fastest
from .runtime import AUTO, WORDS, Runtime

_NOT_RUNTIMES = {"choice", "pair", "runtime", "runtime_registry"}


def runtimes() -> tuple[Runtime, ...]:
    """Every declared runtime, in the order of the choices."""
    return _declared(tuple(importlib.import_module(__package__).__path__))


@functools.cache
def _declared(folders: tuple[str, ...]) -> tuple[Runtime, ...]:
    """Every runtime the package's modules declare (found once per folder the package is in)."""
    found = declared_in(__package__, folders, "RUNTIME", Runtime, _NOT_RUNTIMES, AUTO)
    return tuple(sorted(found.values(), key=lambda r: (r.order, r.name)))


def names() -> tuple[str, ...]:
    return tuple(r.name for r in runtimes())


def runtime(name: str) -> Runtime:
    for r in runtimes():
        if r.name == name:
            return r
    raise InvalidRequest(f"unknown runtime {name!r}; choose one of: {AUTO}, {', '.join(names())}")


def chosen_or_none(name: str) -> Runtime | None:
    """The runtime named; None for auto (not chosen yet), so a check that needs one waits for the choice."""
    return None if name in (AUTO, "") else runtime(name)


def offered(device: str = "auto") -> list[str]:
    """The runtimes a device can run at all (auto first where there are several): what the choices offer."""
    where = resolve_device(device)
    able = [r.name for r in runtimes() if where.type in r.devices]
    return [AUTO, *able] if len(able) > 1 else able


def why_not_each(ask, where) -> dict[Runtime, str]:
    """Each runtime, and why it will not run the pair `ask` on `where` ('' where it will)."""
    return {r: r.why_not(ask, where) for r in runtimes()}


def others_for(ask, own: str) -> tuple[str, ...]:
    """Every runtime but `own` that runs the pair `ask` here as its models are (its precisions and exact mode left to
    each): what a race on every runtime adds."""
    where = resolve_device(ask.device)
    each = why_not_each(replace(ask, insists=False), where)
    return tuple(r.name for r, why in each.items() if r.name != own and not why)


def _elsewhere(ask, refused: Runtime, where) -> str:
    """Where the pair a runtime refused would run instead, or which runtimes give what the caller needs."""
    able = [r.name for r, why in why_not_each(ask, where).items() if r is not refused and not why]
    if able:
        return f" (it runs on {', '.join(able)})"
    giving = [r.name for r in runtimes() if ask.needs and all(getattr(r.gives, n) for n in ask.needs)]
    return f" ({', '.join(WORDS[n] for n in ask.needs)}: {', '.join(giving)} gives them)" if giving else ""


def choose(ask, report=lambda _: None) -> RuntimeChoice:
    """The runtime for the pair `ask` (pair.PairAsk): as named, or (auto) measured among those that can run it here.
    A named runtime that cannot run it, or refuses what the ask insists on, is one line."""
    where = resolve_device(ask.device)
    if ask.runtime != AUTO:
        chosen = runtime(ask.runtime)
        why = chosen.why_not(ask, where)
        if why:
            raise InvalidRequest(f"--runtime {chosen.name}: {why}{_elsewhere(ask, chosen, where)}")
        return RuntimeChoice(chosen.name, f"{chosen.name}, as asked", device=where.type, asked=chosen.name)
    problems = why_not_each(ask, where)
    able = [r for r, why in problems.items() if not why]
    against = "; ".join(f"{r.name}: {why}" for r, why in problems.items() if why)
    if not able:
        raise InvalidRequest(f"no runtime can run this pair here ({against})")
    if len(able) == 1:
        only = able[0].name
        return RuntimeChoice(only, f"{only}: only {only} can run it here as asked ({against})", device=where.type)
    plans = {r.name: plan for r in able if (plan := r.plan(ask, where, report)) is not None}
    if not plans:
        first = able[0].name
        return RuntimeChoice(
            first, f"{first}: the first that runs it here (none measured its costs)", device=where.type
        )
    choice = choose_fastest(plans, where.type)
    report(f"runtime: {choice.reason}")
    return choice
