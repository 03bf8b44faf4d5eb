"""Drafters propose tokens; the target verifies them. See base.Drafter for the protocol."""

from os import PathLike

from .base import Drafter, Proposal
from .draft_model import DraftModelDrafter
from .lookup import HistoryDrafter, NgramDrafter
from .oracle import OracleDrafter
from ..errors import InvalidRequest

DRAFTER_KINDS = ("none", "draft", "ngram", "history", "medusa")  # what users pick; "oracle" is for benchmarks


def build_drafter(kind, settings, generator, target, draft=None, options=None) -> Drafter | None:
    """The drafter named `kind` for `target` (LoadedModel); None means plain decoding.
    options: ngram_max (ngram); candidates, choice (history); medusa (heads), medusa_tree, acceptance (medusa);
    reference, alpha (oracle: the benchmarks' drafter with a set acceptance rate, greedy only)."""
    options = options or {}
    if kind == "none":
        return None
    if kind == "draft":
        return DraftModelDrafter(draft.model, settings, generator, target.vocab_size)
    if kind == "ngram":
        return NgramDrafter(options.get("ngram_max", 3), target.device)
    if kind == "history":
        return HistoryDrafter(options.get("candidates", 4), options.get("choice", "recent"), settings.seed, target.device)
    if kind == "medusa":
        from ..medusa.drafter import DEFAULT_CHOICES, MedusaDrafter  # imported here: the Medusa package builds on this one
        from ..medusa.heads import load_medusa

        heads = options["medusa"]  # a heads folder / Hub id, or heads already loaded (MedusaHeads)
        heads = load_medusa(heads, target) if isinstance(heads, (str, PathLike)) else heads
        return MedusaDrafter(heads, options.get("medusa_tree", DEFAULT_CHOICES),
                             options.get("acceptance", "lossless"))
    if kind == "oracle":
        if not settings.greedy:
            raise InvalidRequest("the set-acceptance-rate drafter knows only the greedy continuation: use temperature 0")
        return OracleDrafter(options["reference"], options["alpha"], target.vocab_size, settings.seed, target.device)
    raise ValueError(f"unknown drafter {kind!r}")


__all__ = ["DRAFTER_KINDS", "Drafter", "Proposal", "DraftModelDrafter", "NgramDrafter", "HistoryDrafter", "build_drafter"]
