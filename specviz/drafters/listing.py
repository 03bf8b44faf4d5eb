"""How a drafter kind is listed: its words on menus and on screen, where it stands in them, the settings the
benchmark measured best for it, and what the benchmark races it against. None of it changes how a drafter is built
or what it drafts (that is its Recipe, contract.py). No torch here."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FamilyBest:
    """A prompt family the benchmark measured a drafter fastest on, and the settings it won with there."""

    family: str  # a kind of assets/prompts.json
    gamma: int
    adaptive: bool


@dataclass(frozen=True)
class Listing:
    label: str  # the app's menu entry
    summary: str  # one line: how it drafts
    describe: Callable[[Any], str] | None = None  # its words on screen, given the options (default: the label)
    order: int = 100  # position in menus
    menu: bool = True  # offered by the CLI and the app; False: a measuring tool of the benchmark only
    # what the benchmark measured fastest for it, used where a caller gives nothing (the CLI, the app's first screen):
    # (name, value) pairs of settings (gamma, adaptive) and of its own options; the library's defaults stay plain
    preferred: tuple = ()
    counterpart: str | None = None  # transformers' own method that does what it does, raced against it in the bench
    lookup: bool = False  # copies drafts from earlier text (the prompt, this output, earlier runs), at least sometimes
    # a measuring tool accepted at a rate it is given (its options `reference` and `alpha`): run once per rate, greedy
    sets_alpha: bool = False
    best_for: tuple[FamilyBest, ...] = ()  # the prompt families it was measured fastest on (the app's examples)

    def prefers(self, name: str, default=None):
        return dict(self.preferred).get(name, default)

    def words(self, options) -> str:
        return self.describe(options) if self.describe else self.label
