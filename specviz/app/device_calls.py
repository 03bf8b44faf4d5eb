"""What runs on the device, as calls that a ZeroGPU Space can run in its GPU worker.

Under ZeroGPU (`spaces.GPU`) each call runs in a process forked from the server: its arguments, its return value and
every item it yields are pickled across, state it changes stays in the worker, and the server stops a generator by
closing it (the worker then ends at its next yield). So a call takes a Request (read and checked by the server,
request.py) and plain data, and yields Packets of plain data: one decoding step each, with the text of the tokens it
shows for the first time; never a tokenizer, a model or a closure. A SpecvizError comes back as a packet (the worker
would reduce it to its class name). Elsewhere the same calls run in the server's process, unchanged.
"""

from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from .. import errors
from ..drafters.suffix_index import RunMemory
from ..errors import InvalidRequest, SpecvizError
from ..events import PLAIN, StepEvent
from ..models import encode_prompt
from ..record import TextTable, TokenTexts, token_ids
from ..runs import Duel, parted
from ..runtimes.pair import Pair
from ..trace import Divergence
from ..traffic.results import News
from ..traffic.runner import MODES, run
from ..traffic.traffic_plan import Point
from ..views.race import SPEC, Lane, interleave
from ..workload.lanes import LaneRun, run_lanes
from .request import Request
from .shelf import ModelShelf

# What a call asks ZeroGPU for: start-up, then seconds per generated token and side (an eager 7B forward on the
# shared GPU, a draft's steps included), so the default race (2 sides × 256 tokens) asks for well under 60 s.
CALL_START_S = 10
SECONDS_PER_TOKEN = 0.06
LONGEST_CALL_S = 300  # ZeroGPU refuses a call that asks for more (about five minutes, at the time of writing)


@dataclass(frozen=True)
class Packet:
    kind: str  # "start" (prompt_ids, exact), "step" (lane, event, texts), "end" (divergence), "error" (error, message);
    #            a Grand Prix also sends "failed" (lane, message) and "parted" (lane, divergence)
    lane: str = ""
    event: StepEvent | None = None
    texts: dict = field(default_factory=dict)  # token id -> its text, for ids this call has not sent before
    prompt_ids: tuple[int, ...] = ()
    divergence: Divergence | None = None
    error: str = ""  # the SpecvizError subclass's name
    message: str = ""
    exact: str = ""  # whether the target runs in exact mode, in one line (models/exact.py exact_for)
    news: News | None = None  # what a run under load did next ("news")


def race_seconds(asked: Request, memory: RunMemory | None = None) -> int:
    """The GPU time a race asks for: both sides' tokens."""
    return CALL_START_S + int(2 * asked.settings.max_new_tokens * SECONDS_PER_TOKEN)


def decode_seconds(asked: Request, plain_ids=None, memory: RunMemory | None = None) -> int:
    """The GPU time one side asks for (a step of the sweep or of Compare all)."""
    return CALL_START_S + int(asked.settings.max_new_tokens * SECONDS_PER_TOKEN)


def grand_prix_seconds(asked: Request, lanes: tuple = (), memory: RunMemory | None = None, others: tuple = ()) -> int:
    """The GPU time a Grand Prix asks for: every lane's tokens, plain decoding's included (N lanes count as N runs;
    another runtime's plain decoding is one of the lanes)."""
    tokens = (1 + len(lanes)) * asked.settings.max_new_tokens
    return min(LONGEST_CALL_S, CALL_START_S + int(tokens * SECONDS_PER_TOKEN))


def under_load_seconds(asked: Request, lanes: tuple = (), points: tuple = (), mode: str = "", rounds: int = 1,
                       prompts=()) -> int:  # fmt: skip
    """The GPU time a run under load asks for: the arrivals' own span at each point for every lane and round
    (requests cannot come sooner than they arrive; a level's all come at 0), and every request's tokens at a batch's
    pace (a step serves every row: counted as a quarter of a lone request's)."""
    span = sum(max(point.arrivals, default=0.0) for point in points)
    tokens = sum(len(point.arrivals) for point in points) * asked.settings.max_new_tokens
    seconds = (1 + len(lanes)) * rounds * (span + tokens * SECONDS_PER_TOKEN / 4)
    return min(LONGEST_CALL_S, CALL_START_S + int(seconds))


def take(packet: Packet, texts: TextTable) -> bool:
    """Keep a packet's token texts; raise the SpecvizError it carries; True once the call has ended."""
    if packet.kind == "error":
        raise getattr(errors, packet.error, SpecvizError)(packet.message)
    texts.update(packet.texts)
    return packet.kind == "end"


class _Texts:
    """The text of each token id, sent once per call."""

    def __init__(self, tokenizer):
        self.text_of = TokenTexts(tokenizer)
        self.sent = set()

    def new(self, event: StepEvent) -> dict[int, str]:
        ids = token_ids([event]) - self.sent
        self.sent |= ids
        return {t: self.text_of(t) for t in sorted(ids)}


class DeviceCalls:
    """The device side of the app: each method is one call the server makes, with a request and plain data."""

    def __init__(self, shelf: ModelShelf):
        self.shelf = shelf

    def _pair(self, asked: Request) -> Pair:
        pair = self.shelf.current()
        if pair is None or pair.name != asked.pair:  # the server loads the pair before it calls
            raise InvalidRequest(f"the pair {asked.pair!r} is not loaded on the device")
        return pair

    def _ready(self, asked: Request) -> tuple[Pair, str]:
        """The pair, its target in exact mode as asked (where the mode holds), and that in one line."""
        pair = self._pair(asked)
        return pair, pair.choose_exact(asked.exact)

    def race(self, asked: Request, memory: RunMemory | None = None) -> Iterator[Packet]:
        """Plain and speculative decoding taking turns (race.interleave): a packet per step of either side, then the
        greedy divergence. `memory` is the visitor's earlier runs, for a drafter that reads them; the call may add
        to it (the server keeps its own and adds the run itself)."""
        try:
            pair, exact = self._ready(asked)
            prompt_ids = encode_prompt(pair.target, asked.prompt)
            yield Packet("start", prompt_ids=tuple(prompt_ids), exact=exact)
            texts = _Texts(pair.target.tokenizer)
            lanes = {PLAIN: Lane(PLAIN), SPEC: Lane(SPEC)}
            duel = Duel(pair, prompt_ids, asked.settings, asked.drafter, asked.options, memory)
            with torch.inference_mode():
                for name in interleave({PLAIN: duel.plain(), SPEC: duel.speculative()}, lanes):
                    event = lanes[name].events[-1]
                    yield Packet("step", lane=name, event=event, texts=texts.new(event))
                found = duel.parted()
            yield Packet("end", divergence=found)
        except SpecvizError as exc:
            yield Packet("error", error=type(exc).__name__, message=str(exc))

    def grand_prix(
        self, asked: Request, lanes: tuple[LaneRun, ...], memory: RunMemory | None = None, others: tuple = ()
    ) -> Iterator[Packet]:
        """Plain decoding and every lane taking turns by the race's rule (workload/lanes.run_lanes): a packet per step
        of any lane, one for a lane that fails, then (greedy) one for each lane that parted from plain decoding.
        Each lane that reads earlier runs drafts from its own copy of `memory`; a lane on another runtime (`others`:
        a race comparing runtimes) runs on the pair held beside it there."""
        try:
            pair, exact = self._ready(asked)
            beside = {r: self.shelf.beside_pair(r) for r in others}
            missing = [r for r, p in beside.items() if p is None]
            if missing:
                raise InvalidRequest(f"the pair is not loaded on {missing[0]} on the device")
            for other in beside.values():
                other.choose_exact(asked.exact)
            prompt_ids = encode_prompt(pair.target, asked.prompt)
            yield Packet("start", prompt_ids=tuple(prompt_ids), exact=exact)
            texts = _Texts(pair.target.tokenizer)
            with torch.inference_mode():
                for news in run_lanes(pair, prompt_ids, asked.settings, list(lanes), memory, others=beside):
                    if news.kind == "step":
                        yield Packet("step", lane=news.lane, event=news.event, texts=texts.new(news.event))
                    else:
                        yield Packet(news.kind, lane=news.lane, divergence=news.divergence, message=news.message)
            yield Packet("end")
        except SpecvizError as exc:
            yield Packet("error", error=type(exc).__name__, message=str(exc))

    def decode(
        self, asked: Request, plain_ids: list[int] | None = None, memory: RunMemory | None = None
    ) -> Iterator[Packet]:
        """One side: plain decoding (drafter 'none') or one drafter; a packet per step, then, for a greedy run given
        the plain side's tokens, where it parted from them."""
        try:
            pair, exact = self._ready(asked)
            prompt_ids = encode_prompt(pair.target, asked.prompt)
            yield Packet("start", prompt_ids=tuple(prompt_ids), exact=exact)
            texts = _Texts(pair.target.tokenizer)
            duel = Duel(pair, prompt_ids, asked.settings, asked.drafter, asked.options, memory)
            with torch.inference_mode():
                for event in duel.speculative():
                    yield Packet("step", lane=asked.drafter, event=event, texts=texts.new(event))
                found = duel.parted(plain_ids) if plain_ids else None
            yield Packet("end", divergence=found)
        except SpecvizError as exc:
            yield Packet("error", error=type(exc).__name__, message=str(exc))

    def under_load(
        self,
        asked: Request,
        lanes: tuple[LaneRun, ...],
        points: tuple[Point, ...],
        mode: str,
        rounds: int,
        prompts: tuple[str, ...],
    ) -> Iterator[Packet]:
        """Many requests at each point (traffic/runner.run, in `mode`: "levels" or "rates"), plain and by each lane,
        of the visitor's prompts: a "news" packet for each thing it does, then the end."""
        try:
            pair, exact = self._ready(asked)
            ids = [encode_prompt(pair.target, p) for p in prompts]
            yield Packet("start", exact=exact)
            with torch.inference_mode():
                for news in run(pair, ids, asked.settings, list(lanes), points, MODES[mode], rounds):
                    yield Packet("news", news=news)
            yield Packet("end")
        except SpecvizError as exc:
            yield Packet("error", error=type(exc).__name__, message=str(exc))

    def divergence(self, asked: Request, prompt_ids: list[int], plain: list[int], spec: list[int]) -> Divergence | None:
        """Where two greedy outputs part, with the target's top two there (for a run the server stopped)."""
        pair = self._pair(asked)
        return parted(pair.target, prompt_ids, plain, spec, asked.settings)
