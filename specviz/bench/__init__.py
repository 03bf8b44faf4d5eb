"""The benchmark: plain decoding, every drafter at each γ and adaptive, and transformers' own methods, on the same
models and prompts in one run (suite.py, from the flags plan.py checks); one run and the median of several
(runs.py); what a bare forward costs (costs.py); the typed rows (rows.py) and the reports drawn from them
(report.py, targets.py, over tally.py's means and groupings)."""
