"""A pair as the app's shelf holds it (`LoadedPair`): its models, the preset they came from, their runtime and
precisions and how those were chosen, and what its weights take."""

from dataclasses import dataclass

from ..runs import Pair
from ..runtimes.choice import LLAMA_CPP
from ..settings import AUTO
from ..trace import RunModels


@dataclass(kw_only=True)
class LoadedPair(Pair):
    """A preset's pair as the shelf holds it; what drafters load for its target (Medusa heads) is kept with the
    target (LoadedModel.companions)."""

    preset: object  # the shelf's PairPreset
    dtype: str  # the target's precision
    draft_dtype: str = ""  # the draft's precision
    asked: str = ""  # the precision asked for: `dtype`, or "auto" (measured: `choice` says what and why)
    asked_runtime: str = AUTO  # the runtime asked for: auto (measured: `runtime` says what and why), or one named

    def precision_words(self) -> str:
        """The pair's runtime and precisions in a few words, with how they were chosen."""
        if self.target.runtime == LLAMA_CPP:
            how = " (auto: measured fastest on this device)" if self.asked_runtime == AUTO else ""
            return f"llama.cpp{how}, {self.dtype}"
        words = self.dtype if self.draft_dtype in ("", self.dtype) else f"{self.dtype}, draft {self.draft_dtype}"
        return words + (" (auto: measured fastest on this device)" if self.choice else "")

    def prompt_line(self, prompt_tokens: int, exact: str) -> str:
        """What a run says when it starts: the prompt's length, the pair, its precisions, exact mode."""
        return f"prompt: {prompt_tokens} tokens; {self.preset.label}, {self.precision_words()}; {exact}"

    def models(self, exact: str = "") -> RunModels:
        """The run's models as a trace records them; `exact` is filled in from the device's answer."""
        return RunModels(
            target=self.preset.target,
            draft=self.preset.draft,
            pair=self.preset.label,
            precision=self.dtype,
            draft_precision=self.draft_dtype,
            device=self.target.device.type,
            exact=exact,
            runtime=self.target.runtime,
        )

    def run_eagerly(self) -> None:
        """Both models on the eager, dynamic-cache path: a pair runs one path, so a fast-path failure of either
        turns it off for both."""
        self.target.model.specviz_static = self.draft.model.specviz_static = False


def held_bytes(pair: LoadedPair | None) -> int:
    """The bytes of a loaded pair's weights: what loading another pair in its place frees (a GGUF's: its file)."""
    if pair is None:
        return 0
    return sum(model_bytes(m) for m in (pair.target, pair.draft))


def model_bytes(loaded) -> int:
    if loaded.runtime == LLAMA_CPP:
        return loaded.model.path.stat().st_size
    return sum(p.numel() * p.element_size() for p in loaded.model.parameters())
