"""What the app hands beyond itself: a race's drafter as settings for other engines (the serving package, from what
its kind declares), with the visitor's concurrency sweep's measurements, and a workload as the job a Ray cluster's
actors each prepare (workload/job.py)."""

import threading
from collections import OrderedDict

from ..drafters.registry import NO_DRAFTER, kind
from ..models.offline import production_name
from ..serving.engine_settings import handoff
from ..serving.handoff import Ran
from ..workload.entrants import production
from ..workload.job import WorkloadJob
from ..workload.view import WorkloadView
from .loaded_pair import LoadedPair
from .memories import SESSIONS_REMEMBERED
from .request import Request


class LevelTables:
    """Each visitor's last concurrency sweep of each pair, as vLLM's draft length per range of batch sizes by drafter:
    the same visitor's later races on that pair hand vLLM the measured table. Bounded like the visitors' memories."""

    def __init__(self):
        self._lock = threading.Lock()
        self._held: OrderedDict[tuple[str, str], dict] = OrderedDict()

    def keep(self, session: str, pair: str, tables: dict) -> None:
        with self._lock:
            self._held.pop((session, pair), None)
            self._held[session, pair] = dict(tables)
            while len(self._held) > SESSIONS_REMEMBERED:
                self._held.popitem(last=False)

    def of(self, session: str, pair: str) -> dict:
        with self._lock:
            return dict(self._held.get((session, pair), {}))


def race_production(asked: Request, pair: LoadedPair, batch_tables: dict) -> tuple:
    """The race's drafter as transformers, vLLM and SGLang would run it; () for plain decoding."""
    if asked.drafter == NO_DRAFTER:
        return ()
    draft = production_name(pair.preset.draft or "") if pair.draft is not None else ""
    target = production_name(pair.preset.target)
    table = batch_tables.get(asked.drafter, ())
    ran = Ran(
        asked.drafter,
        asked.settings,
        asked.options,
        target,
        draft,
        asked.prompt,
        True,
        pair.same_vocab(),
        table,
        serving=kind(asked.drafter).serving,
    )
    return (handoff(ran),)


def entrants_production(
    preset, asked: Request, chosen, batch_tables: dict, pair: LoadedPair | None = None, prompt: str = ""
) -> tuple:
    """A Grand Prix's or a workload's entrants as other engines run them; whether the draft reads the target's ids is
    the loaded pair's to say (assumed so until it is loaded)."""
    same = pair is None or pair.same_vocab()
    return production(chosen, preset.target, preset.draft or "", prompt or asked.prompt, True, same, batch_tables)


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
