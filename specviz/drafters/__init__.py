"""Drafters: each kind lives in one module of this package (or one subpackage) and declares itself as KIND.

kinds.py says how a kind is declared, registry.py finds them all; the engine sees only the drafters they build.
Importing this package loads nothing else, so the screen can read the declarations without torch.
"""
