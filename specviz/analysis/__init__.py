"""What a run means, computed from its events: the paper's speedup theory (theory.py), why a run's speedup came out
as it did (diagnosis.py), a sampled step's rule replayed many times (rule_replay.py) and the chi-square test both the
app and the tests use (stats.py). Nothing here runs a model."""
