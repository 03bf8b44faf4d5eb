"""One row of the benchmark: a method at one γ on one prompt and temperature, as bench.json stores it; and what
bench.json says about the run as a whole."""

from dataclasses import asdict, dataclass, fields

AT_RATE = " α="  # a set-α measuring tool's rows are named after it and its rate: "{name} α={rate}"


def at_rate(name: str, alpha: float) -> str:
    """The method of a set-α measuring tool's rows at one acceptance rate."""
    return f"{name}{AT_RATE}{alpha:g}"


def drafter_of(method: str) -> str:
    """The drafter a specviz row's method names (a set-α tool's without its rate)."""
    return method.partition(AT_RATE)[0]


@dataclass(frozen=True)
class RowKey:
    """What every row of one prompt at one temperature shares."""

    kind: str
    prompt: str
    temperature: float
    prompt_tokens: int
    run_index: int


@dataclass
class BenchRow:
    kind: str  # the prompt's kind (code, extraction, prose, chat, ...)
    prompt: str  # its first 60 characters
    temperature: float
    method: str  # plain, a drafter (the oracle as "oracle α=0.8"), or transformers' plain / counterpart
    gamma: int | str | None  # a fixed γ, "adaptive" (transformers: its own default schedule), None for plain
    library: str  # specviz | transformers
    tps: float  # tokens per second, prefill included: the median run of the repeats
    speedup: float  # over the same library's plain decoding, end to end
    tps_range: tuple[float, float] | None = None  # the slowest and fastest of the repeats
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
    draft_dtype: str | None = None  # the draft model's precision, for the draft model and its transformers counterpart
    c: float | None = None  # drafting seconds per drafted token ÷ V(1), one target forward
    draft_name: str | None = None  # which draft model, for the draft model and its transformers counterpart
    prompt_tokens: int | None = None  # the prompt's length in the target's tokens (chat template included)
    run_index: int = 0  # the prompt's place among its kind's prompts, which run in order (0: the first)
    diagnosed: float | None = None  # the app's diagnosis: speedup predicted from α and the step costs measured
    decode_speedup: float | None = None  # measured over decode time only, as the diagnosis compares it
    nodes: float | None = None  # draft tokens verified per drafting step (a tree's size; a chain's length)
    copied: float | None = None  # the share of drafting steps whose draft was copied, not written by a model
    # specviz: whether the target ran in exact mode; None for transformers (its own kernels) and where the mode cannot
    # hold (a float32 target, a GPU)
    exact: bool | None = None
    ran_on: str | None = None  # on a cluster: the actor and node whose clock timed this row (None: here)

    @property
    def name(self) -> str:
        """The method as tables show it: with the draft model and its precision where there is one, and marked where
        specviz's target ran without exact mode."""
        draft = f" ({self.draft_name} {self.draft_dtype})" if self.draft_dtype else ""
        return self.method + draft + (" [exact off]" if self.exact is False else "")

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "BenchRow":
        """A row as bench.json stores it (its repeats' range a JSON list)."""
        spread = data.get("tps_range")
        return cls(**{**data, "tps_range": tuple(spread) if spread else None})


@dataclass(frozen=True)
class BenchMeta:
    """The run as a whole: bench.json's "meta", and the reports' titles."""

    target: str
    draft: str | None  # the draft models given, when a drafter ran with one
    brought: tuple  # (option, where its model was found, or None where no drafter took it) per model location
    dtype: str
    drafts: list[str]  # "name precision" of each draft model a drafter needing one ran with
    device: str
    max_new_tokens: int
    repeats: int
    gammas: list[int]
    methods: list[str]
    prompts: int
    minutes: float
    when: str
    exact: str = ""  # the modes specviz's rows ran in, each as its run's line said it (models/exact.py exact_for)
    cluster: str = ""  # on a Ray cluster: each actor and the prompt kinds it ran, the kinds retried or given up

    def to_json(self) -> dict:
        """Its fields in order, each model location under its option's name in place of `brought`."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out.update(dict(value) if f.name == "brought" else {f.name: value})
        return out
