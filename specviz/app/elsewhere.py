"""What the app hands beyond itself: a race's drafter as settings for other engines (drafters/production.py), and
a workload as the job a Ray cluster's actors each prepare (workload/job.py)."""

from ..drafters.production import Ran, handoff
from ..drafters.registry import NO_DRAFTER
from ..models.offline import production_name
from ..workload.job import WorkloadJob
from ..workload.view import WorkloadView
from .request import Request
from .shelf import LoadedPair


def race_production(asked: Request, pair: LoadedPair) -> tuple:
    """The race's drafter as transformers, vLLM and SGLang would run it; () for plain decoding."""
    if asked.drafter == NO_DRAFTER:
        return ()
    draft = production_name(pair.preset.draft or "") if pair.draft is not None else ""
    target = production_name(pair.preset.target)
    return (handoff(Ran(asked.drafter, asked.settings, asked.options, target, draft, asked.prompt, True)),)


def cluster_job(asked: Request, pair: LoadedPair, prompts: list[str], chosen, view: WorkloadView) -> WorkloadJob:
    """The workload as each of the cluster's actors prepares it: the same pair at the same precisions, the same
    drafters; the visitor's earlier runs stay here (a drafter that remembers learns from its actor's prompts)."""
    return WorkloadJob(
        target=pair.preset.target,
        draft=pair.preset.draft or "",
        dtype=pair.dtype,
        draft_dtype=pair.draft_dtype,
        device="auto",
        exact=asked.exact,
        chat=True,
        prompts=tuple(prompts),
        chosen=tuple(chosen),
        base=asked.settings,
        setting=view.setting,
        models=view.models,
    )
