"""What the app hands beyond itself: a race's drafter as settings for other engines (the serving package, from what
its kind declares), with the visitor's concurrency sweep's measurements, and a workload as the job a Ray cluster's
actors each prepare (workload/job.py)."""

import threading
from collections import OrderedDict
from dataclasses import replace

from ..drafters.registry import NO_DRAFTER, kind
from ..models.offline import production_name
from ..runtimes.pair import Pair
from ..serving.engine_settings import handoff
from ..serving.handoff import Ran
from ..workload.entrants import production, ran_on
from ..workload.job import WorkloadJob
from ..workload.view import WorkloadView
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


def race_production(asked: Request, pair: Pair, batch_tables: dict) -> tuple:
    """The race's drafter as transformers, vLLM and SGLang would run it; () for plain decoding."""
    if asked.drafter == NO_DRAFTER:
        return ()
    draft = production_name(pair.ask.draft) if pair.draft is not None else ""
    target = production_name(pair.ask.target)
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
        **ran_on(pair.runs_on),
    )
    return (handoff(ran),)


def entrants_production(
    preset, asked: Request, chosen, batch_tables: dict, pair: Pair | None = None, prompt: str = ""
) -> tuple:
    """A Grand Prix's or a workload's entrants as other engines run them; whether the draft reads the target's ids is
    the loaded pair's to say (assumed so until it is loaded)."""
    same = pair is None or pair.same_vocab()
    on = pair.runs_on if pair is not None else None
    return production(chosen, preset.target, preset.draft or "", prompt or asked.prompt, True, same, batch_tables, on)


def cluster_job(asked: Request, pair: Pair, prompts: list[str], chosen, view: WorkloadView) -> WorkloadJob:
    """The workload as each of the cluster's actors prepares it: the same pair on the same runtime at the same
    precisions, the same drafters; the visitor's earlier runs stay here (a drafter that remembers learns from its
    actor's prompts)."""
    precisions = {"dtype": pair.target.precision, "draft_dtype": pair.draft.precision} if pair.draft else {}
    gives = pair.runs_on.gives
    exact = asked.exact if gives.exact_mode else None  # as the app asks it: where it holds
    ask = replace(pair.ask, exact=exact, device="auto", **(precisions if gives.precisions else {}))
    return WorkloadJob(
        ask=ask,
        runtime=pair.runtime,
        chat=True,
        prompts=tuple(prompts),
        chosen=tuple(chosen),
        base=asked.settings,
        setting=view.setting,
    )
