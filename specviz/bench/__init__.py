"""The benchmark: plain decoding, every drafter at each γ and adaptive, and transformers' own methods, on the same
models and prompts in one run (suite.py); what a bare forward costs (costs.py); the typed rows (rows.py) and the
reports drawn from them (report.py)."""
