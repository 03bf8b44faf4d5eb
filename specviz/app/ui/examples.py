"""Example prompts by kind. Picking one also picks the drafter and γ that the benchmark measured fastest for that
kind of prompt with the offline pair on a laptop CPU (docs/benchmarks.md, the family suite, 2026-12-03), as each
drafter declares it (Listing.best_for), so an example shows a setup that pays; every control can still be
changed before Run."""

from collections.abc import Iterator, Sequence
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


FAMILIES = (  # (a kind of assets/prompts.json, its label), in the order the examples are offered
    ("code", "Code"),
    ("extraction", "Extraction from a passage"),
    ("summarization", "Summarize an article"),
    ("rag", "Answer from retrieved passages"),
    ("document", "Return a long document with one edit"),
    ("translation", "Translation"),
    ("math", "Math reasoning"),
    ("qa", "Question answering"),
    ("repeat_sql", "The same task again (SQL): run them in order"),
    ("prose", "Free prose"),
)


def example_kinds() -> tuple[ExampleKind, ...]:
    """Every family a drafter was measured best on, with that drafter and its settings, asked of the registry."""
    from ...drafters.registry import best_for  # loads the drafters (and torch): asked when a screen is built

    examples = []
    for key, label in FAMILIES:
        found = best_for(key)
        if found is not None:
            drafter, best = found
            examples.append(ExampleKind(key, label, drafter.name, best.gamma, best.adaptive))
    return tuple(examples)


class _Measured(Sequence):
    """EXAMPLE_KINDS: example_kinds() asked when first read, not when the UI is imported (the UI imports no torch)."""

    def __getitem__(self, index):
        return example_kinds()[index]

    def __len__(self) -> int:
        return len(example_kinds())

    def __iter__(self) -> Iterator[ExampleKind]:
        return iter(example_kinds())


EXAMPLE_KINDS: Sequence[ExampleKind] = _Measured()


def example_rows(kind: ExampleKind, prompts: dict) -> list[list]:
    """[prompt, drafter, γ, adaptive] rows for gr.Examples; text prompts only (a chat history is no single box)."""
    return [[p, kind.drafter, kind.gamma, kind.adaptive] for p in prompts.get(kind.key, []) if isinstance(p, str)]
