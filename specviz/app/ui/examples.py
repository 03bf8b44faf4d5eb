"""Example prompts by kind. Picking one also picks the drafter and γ that the benchmark measured fastest for that
kind of prompt with the offline pair on a laptop CPU (docs/benchmarks.md, the task-family table), so an example
shows a setup that pays; every control can still be changed before Run."""

from dataclasses import dataclass


@dataclass(frozen=True)
class ExampleKind:
    key: str  # a kind of assets/prompts.json
    label: str
    drafter: str  # the best measured for this kind
    gamma: int
    adaptive: bool

    def title(self) -> str:
        return f"{self.label}: {self.drafter}, " + (
            f"adaptive γ ≤ {self.gamma}" if self.adaptive else f"γ {self.gamma}"
        )


# From the task-family benchmark of 2026-11-23 (int8 draft; docs/benchmarks.md), and the earlier runs for extraction,
# prose and the repetition workload.
EXAMPLE_KINDS = (
    ExampleKind("code", "Code", "draft", 4, False),  # 2.10x, τ 4.2
    ExampleKind("extraction", "Extraction from a passage", "ngram", 10, True),
    ExampleKind("summarization", "Summarize an article", "suffix", 10, True),  # 1.75x (n-gram 1.71x)
    ExampleKind("rag", "Answer from retrieved passages", "suffix", 10, False),  # 1.57x (n-gram 1.51x)
    ExampleKind("translation", "Translation", "draft", 4, True),  # 1.43x
    ExampleKind("math", "Math reasoning", "draft", 10, False),  # 2.70x, τ 7.4
    ExampleKind("qa", "Question answering", "ngram", 10, True),  # 1.68x
    ExampleKind("repeat_sql", "The same task again (SQL): run them in order", "suffix", 16, False),  # 3.3x on run 2
    ExampleKind("prose", "Free prose", "draft", 4, True),
)


def example_rows(kind: ExampleKind, prompts: dict) -> list[list]:
    """[prompt, drafter, γ, adaptive] rows for gr.Examples; text prompts only (a chat history is no single box)."""
    return [[p, kind.drafter, kind.gamma, kind.adaptive] for p in prompts.get(kind.key, []) if isinstance(p, str)]
