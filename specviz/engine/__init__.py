"""The engine: one decode loop for plain and speculative decoding, the acceptance rules, token trees and KV caches.

It knows drafters only through the contract in step.py (a Proposal in, a Verdict out) and nothing of the
registry, the app or the benchmark, which all build on it.
"""

__all__ = ["generate", "make_clock", "new_generator"]


def __getattr__(name: str):
    """The loop, and torch with it, load when first asked for, so the engine's pure parts (the admission queue,
    adaptive γ's pricing) import without them: the traffic simulator runs adaptive γ's own code."""
    if name in __all__:
        from . import loop

        return getattr(loop, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
