"""Drafters: each kind lives in one module of this package (or one subpackage) and declares itself as KIND.

contract.py says what a drafter is: the four verbs the decode loop calls, and the Recipe a kind declares (with its
options, options.py, and how menus list it, listing.py); registry.py finds them all. Importing this package loads
nothing else.
"""
