"""A workload as plain data (which models, which prompts, which drafters), and how to prepare it: load the models,
check the workload against the device's bounds and say how one side of one prompt is decoded. The CLI prepares it
here; a Ray cluster's actors each prepare it for themselves (workload/cluster.py), the app's Your prompts tab too
when it was launched with a cluster."""

from dataclasses import dataclass

from ..drafters.registry import kind
from ..drafters.suffix_index import RunMemory
from ..models import encode_prompt
from ..record import TokenTexts
from ..runs import Duel
from ..runtimes.choice import RuntimeChoice
from ..runtimes.pair import PairAsk, open_pair
from ..settings import Settings
from .entrants import Entrant, production
from .prompts import Limits, check_workload, limits_for
from .run import RunSide, side_runner
from .view import WorkloadView


@dataclass(frozen=True)
class WorkloadJob:
    ask: PairAsk  # the pair, by names
    runtime: RuntimeChoice | None = None  # its runtime as the caller chose it (None: chosen when it is opened)
    chat: bool = True
    prompts: tuple[str, ...] = ()
    chosen: tuple[Entrant, ...] = ()
    base: Settings = Settings()  # plain decoding's settings; each drafter's are its entrant's
    setting: str = ""  # how γ was chosen, in words


def prepare(job: WorkloadJob, actors: int = 1) -> tuple[WorkloadView, RunSide]:
    """The models loaded once, the workload checked against the device's bounds (`actors` devices' on a cluster),
    and how one side of one prompt is decoded."""
    pair = open_pair(job.ask, choice=job.runtime)
    target = pair.target
    ids = [encode_prompt(target, p, chat=job.chat) for p in job.prompts]
    runnable = [e for e in job.chosen if e.settings]
    one = limits_for(target.device.type)
    limits = Limits(one.prompts * actors, one.tokens * actors)
    check_workload(list(job.prompts), limits, sum(map(len, ids)), 1 + len(runnable), job.base.max_new_tokens)
    text_of = TokenTexts(target.tokenizer)
    view = WorkloadView(
        prompts=list(job.prompts),
        contenders=[e.contender for e in job.chosen],
        greedy=job.base.greedy,
        setting=job.setting,
        max_new_tokens=job.base.max_new_tokens,
        text_of=text_of,
        models=pair.models(pair.exact),
        production=production(
            job.chosen, job.ask.target, job.ask.draft, job.prompts[0], job.chat, pair.same_vocab(), runtime=pair.runs_on
        ),
    )
    by_name = {e.name: e for e in runnable}
    memories = {e.name: RunMemory() for e in runnable if kind(e.name).remembers}  # this workload's earlier prompts

    def decode_one(i, side, plain_ids, memory):  # the report shows no step's detail: none is recorded
        e = by_name.get(side)  # None: plain decoding's side
        asked = (e.settings, side, e.options, memory) if e else (job.base,)
        duel = Duel(pair, ids[i], *asked, explain=False)
        yield from duel.speculative()
        found = duel.parted(plain_ids, text_of) if e and plain_ids is not None else None
        if found is not None:
            yield found
        return ids[i]

    return view, side_runner(decode_one, memories)
