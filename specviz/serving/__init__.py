"""Serving: a drafter as the engines that serve models run it. Each drafter kind declares what it is in transformers,
vLLM and SGLang (declaration.py: the method it is there, or the nearest one and what that gives up); this package
writes that declaration as each engine spells it: a transformers script, `vllm serve --speculative-config`, SGLang's
`--speculative-*` flags, and vLLM's draft length per batch size from a concurrency sweep. It is the one home of every
engine's keys and knows no drafter by name. Pure Python: no torch, nothing above the layer of traces."""
