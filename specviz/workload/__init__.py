"""A workload of one's own prompts, every chosen drafter against plain decoding on each (prompts.py reads and bounds
it, view.py holds the results as they come in, run.py fills them). Pure Python."""
