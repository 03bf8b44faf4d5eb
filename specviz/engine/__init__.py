"""The engine: one decode loop for plain and speculative decoding, the acceptance rules, token trees and KV caches.

It knows drafters only through the contract in step.py (a Proposal in, a Verdict out) and nothing of the
registry, the app or the benchmark, which all build on it.
"""

from .loop import generate, make_clock, new_generator

__all__ = ["generate", "make_clock", "new_generator"]
