"""A workload as plain data (which models, which prompts, which drafters), and how to prepare it: load the models,
check the workload against the device's bounds and say how one side of one prompt is decoded. The CLI prepares it
here; a Ray cluster's actors each prepare it for themselves (workload/cluster.py), the app's Your prompts tab too
when it was launched with a cluster."""

from dataclasses import dataclass, replace

from ..drafters.registry import kind
from ..drafters.suffix_index import RunMemory
from ..models import encode_prompt
from ..models.loading import best_draft_dtype
from ..record import TokenTexts
from ..runs import Duel, Pair, open_draft, open_gguf, open_target
from ..settings import Settings
from ..trace import RunModels
from .entrants import Entrant, production
from .prompts import Limits, check_workload, limits_for
from .run import RunSide, side_runner
from .view import WorkloadView


@dataclass(frozen=True)
class WorkloadJob:
    target: str
    draft: str  # "": no draft model
    dtype: str
    draft_dtype: str
    device: str
    exact: bool
    chat: bool
    prompts: tuple[str, ...]
    chosen: tuple[Entrant, ...]
    base: Settings  # plain decoding's settings; each drafter's are its entrant's
    setting: str  # how γ was chosen, in words
    models: RunModels  # the models as the report names them (exact mode filled in once loaded)
    runtime: str = "transformers"  # what computes them (llama.cpp: each GGUF as it is)


def prepare(job: WorkloadJob, actors: int = 1) -> tuple[WorkloadView, RunSide]:
    """The models loaded once, the workload checked against the device's bounds (`actors` devices' on a cluster),
    and how one side of one prompt is decoded."""
    llama = job.runtime == "llama.cpp"
    target = open_gguf(job.target) if llama else open_target(job.target, job.dtype, job.device)
    draft_dtype = "" if llama else job.draft_dtype or best_draft_dtype(target.device) or job.dtype  # as the CLI's
    pair = Pair(target, open_draft(target, job.draft, draft_dtype, job.device) if job.draft else None)
    pair.choose_exact(job.exact)
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
        models=replace(
            job.models, exact=pair.exact, device=target.device.type, draft_precision=draft_dtype if job.draft else ""
        ),
        production=production(job.chosen, job.target, job.draft, job.prompts[0], job.chat, pair.same_vocab()),
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
