"""Which of specviz's drafters vLLM also has, by the `method` its `--speculative-config` takes (as vLLM's
documentation names them), and, for the others, why there is none."""

METHODS = {"draft": "draft_model", "ngram": "ngram", "suffix": "suffix", "eagle": "eagle", "medusa": "medusa"}
NOT_IN_VLLM = {
    "history": "vLLM has no lookup over a tree of earlier continuations; its nearest is `suffix`",
    "hybrid": "vLLM runs one method per deployment; it cannot switch between a lookup and a model per step",
    "dflash": "vLLM's documentation names no DFlash method",
    "oracle": "the oracle is a stand-in with a set acceptance, not a drafter",
}
