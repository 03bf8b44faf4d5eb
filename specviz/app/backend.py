"""The app's device side: loads pairs, runs the race and the γ sweep, explains divergences. Uses torch;
the UI only sees the pure-Python views of race.py and sweep.py."""

import time
from dataclasses import replace
from typing import Callable, Iterator, Optional

import torch

from ..drafters.kinds import DrafterKind, Options
from ..drafters.registry import PLAIN as NO_DRAFTER, decode, kind, kinds
from ..errors import InvalidRequest
from ..models import LoadedModel, encode_prompt
from ..settings import Settings
from .race import PLAIN, SPEC, Divergence, Lane, RaceRequest, RaceView, interleave, mode_text
from .shelf import ModelShelf
from .sweep import SweepView

Stopped = Callable[[], bool]


class TokenTexts:
    """id -> the text of that one token, remembered (Figure-1 rows ask for the same ids again and again)."""

    def __init__(self, tokenizer):
        self.tokenizer, self.seen = tokenizer, {}

    def __call__(self, token: int) -> str:
        if token not in self.seen:
            self.seen[token] = self.tokenizer.decode([token])
        return self.seen[token]


class _Flag:  # the engine's StopFlag protocol over a callable
    def __init__(self, stopped: Stopped):
        self.is_set = stopped


class Backend:
    def __init__(self, shelf: ModelShelf):
        self.shelf = shelf

    def _check(self, request: RaceRequest) -> tuple[Settings, DrafterKind, Options]:
        """Everything checkable before a model loads: the settings, the drafter and its options (with what the pair
        brings, such as its Medusa heads), and whether the drafter has what it needs for the pair's target."""
        settings = request.settings()
        if request.drafter == NO_DRAFTER:
            raise InvalidRequest("the speculative side needs a drafter; 'none' is what the plain side runs")
        for other in kinds(menu_only=True):  # every option on the screen is checked, whichever drafter runs
            other.parse(request.options)
        chosen = kind(request.drafter)
        if not chosen.menu:  # the benchmark's measuring tools are not raced
            raise InvalidRequest(f"unknown drafter {request.drafter!r}")
        preset = self.shelf.preset(request.pair)
        options = chosen.parse({**request.options, **dict(preset.options)})
        chosen.check_for(options, preset.target)
        return settings, chosen, options

    def race(self, request: RaceRequest, stopped: Stopped = lambda: False) -> Iterator[RaceView]:
        """Views while loading, then after every decoding step of either side; the last one is final."""
        settings, chosen, options = self._check(request)
        for line in self.shelf.load(request.pair, request.dtype):
            yield RaceView(Lane(PLAIN), Lane(SPEC), str, settings.greedy, message=line)
        pair = self.shelf.current()
        began = time.perf_counter()  # the race's wall clock starts once the models are in
        prompt_ids = encode_prompt(pair.target, request.prompt)
        target, stop = pair.target, _Flag(stopped)
        view = RaceView(Lane(PLAIN), Lane(SPEC), TokenTexts(target.tokenizer), settings.greedy,
                        message=f"prompt: {len(prompt_ids)} tokens; {pair.preset.label}, {pair.dtype}",
                        mode=mode_text(chosen.words(options), settings), lossy=settings.lossy)
        sides = {
            PLAIN: decode(target, prompt_ids, settings, stop=stop),
            SPEC: decode(target, prompt_ids, settings, chosen.name, pair.draft, options, stop),
        }
        with torch.inference_mode():
            for _ in interleave(sides, {PLAIN: view.plain, SPEC: view.spec}, stopped):
                view.wall_s = time.perf_counter() - began
                yield view
            view.stopped = not (view.plain.done and view.spec.done)
            if settings.greedy:
                view.divergence = divergence(target, prompt_ids, view.plain.tokens, view.spec.tokens, view.text_of)
        view.finished, view.wall_s = True, time.perf_counter() - began
        yield view

    def sweep(self, request: RaceRequest, gammas=range(1, 9), stopped: Stopped = lambda: False) -> Iterator[SweepView]:
        """Plain once, then speculative at every γ on the current prompt; a view after each run."""
        settings, chosen, options = self._check(request)
        view = SweepView(gammas=tuple(gammas))
        for line in self.shelf.load(request.pair, request.dtype):
            view.message = line
            yield view
        pair = self.shelf.current()
        prompt_ids = encode_prompt(pair.target, request.prompt)
        target, stop = pair.target, _Flag(stopped)
        with torch.inference_mode():
            view.message = "plain decoding (the baseline)"
            yield view
            view.plain = list(decode(target, prompt_ids, settings, stop=stop))
            for gamma in view.gammas:
                if stopped():
                    break
                view.message = f"speculative decoding at γ = {gamma}"
                yield view
                at = replace(settings, gamma=gamma, adaptive=False)  # the sweep measures each fixed γ
                view.runs[gamma] = list(decode(target, prompt_ids, at, chosen.name, pair.draft, options, stop))
        view.finished, view.stopped = True, stopped()
        view.message = "stopped" if view.stopped else "done"
        yield view


@torch.inference_mode()
def divergence(target: LoadedModel, prompt_ids: list[int], plain: list[int], spec: list[int],
               text_of: Callable[[int], str]) -> Optional[Divergence]:
    """First position where the outputs differ (over their common length), with the target's top-2 there."""
    at = next((i for i, (a, b) in enumerate(zip(plain, spec)) if a != b), None)
    if at is None:
        return None
    context = torch.tensor([prompt_ids + plain[:at]], device=target.device)
    probs = torch.softmax(target.model(input_ids=context).logits[0, -1].float(), dim=-1)
    top = torch.topk(probs, 2)
    return Divergence(at, text_of(plain[at]), text_of(spec[at]),
                      tuple((text_of(int(i)), float(p)) for p, i in zip(top.values, top.indices)))
