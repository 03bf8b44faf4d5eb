"""The app's flows under load, on the server side: a concurrency sweep (every level's requests decoded together) and
traffic (requests arriving at a rate, served by continuous batching), each one device call whose packets rebuild the
pure-Python view (concurrency/sweep_view.py, traffic/traffic_view.py); the last view is final, with its record.
Mixed into the Backend (backend.py), whose shelf, device line and calls they use."""

import time
from collections.abc import Callable, Iterator, Mapping

from ..concurrency.sweep_plan import check_levels, check_rounds
from ..concurrency.sweep_record import ConcurrencyRecord
from ..concurrency.sweep_results import ConcurrencyNews
from ..concurrency.sweep_runner import plan_sweep
from ..concurrency.sweep_view import ConcurrencyView
from ..concurrency.vllm_config import measured_tables, vllm_advice
from ..drafters.registry import NO_DRAFTER
from ..errors import InvalidRequest
from ..events import PLAIN
from ..models import encode_prompt
from ..record import TextTable
from ..runs import lane_runs
from ..traffic.simulator import held_out, project
from ..traffic.traffic_plan import MAX_REQUESTS, MAX_ROWS, check_count, check_rates, check_slo, poisson_arrivals
from ..traffic.traffic_record import TrafficRecord
from ..traffic.traffic_results import TrafficNews
from ..traffic.traffic_view import TrafficView
from ..traffic.vllm_table import traffic_vllm_advice
from ..workload.entrants import lane_entrants
from ..workload.prompts import GPU_LIMITS, check_workload
from .device_calls import take
from .request import entry_rules, read_request

Stopped = Callable[[], bool]
LONGEST_ARRIVALS_S = 600  # a run's arrivals at its lowest rate, for each lane: the app's device is shared


class UnderLoad:
    def concurrency(
        self,
        values: Mapping,
        prompts: list[str],
        lanes: str | list[str] | None,
        levels,
        rounds=1,
        best: bool = True,
        stopped: Stopped = lambda: False,
        session: str = "",
    ) -> Iterator[ConcurrencyView]:
        """Plain decoding and each lane with every level's requests decoded together (concurrency/sweep_runner.py), in
        one device call; a view after everything the sweep does, the last one final with its record."""
        levels, rounds = check_levels(levels), check_rounds(rounds)
        check_workload(prompts, GPU_LIMITS, 0, 1, 1)  # readable prompts, before any model is asked for anything
        asked = read_request({**values, "prompt": prompts[0], "drafter": NO_DRAFTER}, self.shelf, session)
        preset = self.shelf.preset(asked.pair)
        rules = entry_rules(asked, preset, self.swept.of(session, asked.pair))
        chosen = lane_entrants(lanes, asked.settings, not best, rules)
        view, runs = plan_sweep(levels, chosen, asked.settings.greedy)
        began = time.perf_counter()
        with self.line.on_device(session, len(levels) * (1 + len(runs)), "concurrency sweep"):
            for line in self._load(asked):
                view.message = line
                yield view
            pair = self.shelf.current()
            call = self.calls.concurrency(asked, runs, levels, rounds, tuple(prompts))
            view.exact = yield from _relay_news(call, view, stopped)
        if not view.finished:
            view.hear(ConcurrencyNews("end", "stopped: the levels run so far stay", stopped=True))
        models = pair.models(view.exact)
        self.swept.keep(session, asked.pair, measured_tables(view))
        wall_s, vllm = time.perf_counter() - began, vllm_advice(view, models.draft)
        view.saved = ConcurrencyRecord.of(view, prompts, asked.settings, models, wall_s, "the app", vllm)
        yield view

    def traffic(
        self,
        values: Mapping,
        prompts: list[str],
        lanes: str | list[str] | None,
        rates,
        requests=16,
        slo=(5.0, 0.2),
        max_rows=8,
        rounds=1,
        best: bool = True,
        stopped: Stopped = lambda: False,
        session: str = "",
    ) -> Iterator[TrafficView]:
        """Requests arriving at each rate (a seeded Poisson process, request r asking prompt r in turn), served plain
        and by each lane with at most `max_rows` decoding together (traffic/traffic_runner.py), in one device call; a
        view after everything it does, the last one final: the simulator checked at each rate, vLLM's table, the
        record. Everything asked is checked before any model loads."""
        schedule_rates, slo, rounds = check_rates(rates), check_slo(*slo), check_rounds(rounds)
        requests = check_count(_whole(requests), "the number of requests", MAX_REQUESTS)
        max_rows = check_count(_whole(max_rows), "the most requests decoding at once", MAX_ROWS)
        lowest = min(schedule_rates)
        if requests / lowest > LONGEST_ARRIVALS_S:
            raise InvalidRequest(
                f"{requests} requests at {lowest:g}/s take about {requests / lowest / 60:.0f} "
                f"minutes of arrivals for each lane; here at most {LONGEST_ARRIVALS_S // 60} minutes: fewer requests "
                "or a higher rate"
            )
        check_workload(prompts, GPU_LIMITS, 0, 1, 1)
        asked = read_request({**values, "prompt": prompts[0], "drafter": NO_DRAFTER}, self.shelf, session)
        preset = self.shelf.preset(asked.pair)
        rules = entry_rules(asked, preset, self.swept.of(session, asked.pair))
        chosen = lane_entrants(lanes, asked.settings, not best, rules)
        schedules = {rate: poisson_arrivals(rate, requests, asked.settings.seed) for rate in schedule_rates}
        runs = tuple(lane_runs(chosen))
        view = TrafficView(tuple(schedules), (PLAIN, *(e.name for e in chosen)), slo, rounds)
        view.notes = {e.name: e.contender.note for e in chosen if not e.settings}
        began = time.perf_counter()
        with self.line.on_device(session, len(schedules) * rounds * (1 + len(runs)), "traffic"):
            for line in self._load(asked):
                view.message = line
                yield view
            pair = self.shelf.current()
            lengths = [len(encode_prompt(pair.target, p)) for p in prompts]
            call = self.calls.traffic(asked, runs, tuple(schedules.items()), max_rows, rounds, tuple(prompts))
            exact = yield from _relay_news(call, view, stopped)
        if not view.finished:
            view.hear(TrafficNews("end", "stopped: the runs so far stay"))
        held_out(view, dict(enumerate(lengths)), schedules, max_rows)  # each rate, predicted from the others
        project(view, dict(enumerate(lengths)), requests, max_rows, asked.settings.seed)  # and around them
        models = pair.models(exact)
        view.advice = traffic_vllm_advice(view, models.draft)
        wall_s = time.perf_counter() - began
        view.saved = TrafficRecord.of(view, prompts, lengths, max_rows, asked.settings, models, wall_s, "the app")
        yield view


def _relay_news(call, view, stopped: Stopped):
    """A device call's news heard by `view`, the view yielded after each, until the call ends or `stopped()`; returns
    the exact-mode line of its start. The view that heard the end is not yielded: a finished view is shown once, by
    the caller, with what it works out from the runs (the simulator, vLLM's lines, the record). The call is closed
    either way: it ends at the next batch step (under ZeroGPU, the worker at its next one)."""
    exact = ""
    try:
        for packet in call:
            if take(packet, TextTable()):
                break
            if packet.kind == "start":
                exact = packet.exact
                continue
            view.hear(packet.news)
            if not view.finished:
                yield view
            if stopped():
                break
    finally:
        call.close()
    return exact


def _whole(value):
    """A count as a number box sends it (16.0) read as the whole number it is; anything else as it came."""
    return int(value) if isinstance(value, float) and value.is_integer() else value
