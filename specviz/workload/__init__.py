"""A workload of one's own prompts, every chosen drafter against plain decoding on each: prompts.py reads and bounds
it, entrants.py picks each drafter's options and settings from the registry, view.py holds the results as they come
in, run.py fills them. Only entrants.py loads the drafters (and torch); the rest is pure Python."""
