"""One row of the benchmark: a method at one γ on one prompt and temperature, as bench.json stores it."""

from dataclasses import asdict, dataclass

# transformers' own method that does what a drafter does, raced against it cell by cell
COUNTERPART = {
    "draft": "transformers assisted",
    "hybrid": "transformers assisted",
    "ngram": "transformers prompt lookup",
}


@dataclass
class BenchRow:
    kind: str  # the prompt's kind (code, extraction, prose, chat, ...)
    prompt: str  # its first 60 characters
    temperature: float
    method: str  # plain, a drafter (the oracle as "oracle α=0.8"), or transformers' plain / counterpart
    gamma: int | str | None  # a fixed γ, "adaptive" (transformers: its own default schedule), None for plain
    library: str  # specviz | transformers
    tps: float  # tokens per second, prefill included
    speedup: float  # over the same library's plain decoding, end to end
    alpha: float | None = None  # accepted / drafted
    tau: float | None = None  # tokens per target forward
    per_tau: float | None = None  # speedup ÷ τ: what each forward's tokens were worth
    predicted: float | None = None  # the speedup the run's own drafting time and bare forward costs allow
    efficiency: float | None = None  # measured decode speedup ÷ predicted: 1 means no engine overhead
    iid: float | None = None  # the paper's formula at the run's α and draft cost, with V(k) growing with k
    mean_gamma: float | None = None  # the γ steps were given (adaptive: as chosen)
    by_depth: list | None = None  # α by draft position 1..max γ
    same_as_plain: bool | None = None  # greedy: identical to the same library's plain output
    vs_transformers: float | None = None  # tokens/s over transformers' counterpart (same prompt, γ, run)
    verify_costs: dict | None = None  # plain rows: V(k)/V(1) measured after this prompt
    draft_dtype: str | None = (
        None  # the draft model's precision, for the draft model and its transformers counterpart
    )
    c: float | None = None  # drafting seconds per drafted token ÷ V(1), one target forward
    draft_name: str | None = None  # which draft model, for the draft model and its transformers counterpart
    prompt_tokens: int | None = None  # the prompt's length in the target's tokens (chat template included)
    run_index: int = 0  # the prompt's place among its kind's prompts, which run in order (0: the first)
    diagnosed: float | None = None  # the app's diagnosis: speedup predicted from α and the step costs measured
    decode_speedup: float | None = None  # measured over decode time only, as the diagnosis compares it
    nodes: float | None = None  # draft tokens verified per drafting step (a tree's size; a chain's length)
    copied: float | None = None  # the share of drafting steps whose draft was copied, not written by a model

    @property
    def name(self) -> str:
        """The method as tables show it: with the draft model and its precision where there is one."""
        return self.method + (f" ({self.draft_name} {self.draft_dtype})" if self.draft_dtype else "")

    def to_json(self) -> dict:
        return asdict(self)
