"""The app's flows under load, on the server side: a concurrency sweep (every level's requests decoded together) and
traffic (requests arriving at a rate, served by continuous batching), each one device call whose packets rebuild the
pure-Python view (traffic/levels_view.py, traffic/rates_view.py); the last view is final, with its record.
Mixed into the Backend (backend.py), whose shelf, device line and calls they use."""

import time
from collections.abc import Callable, Iterator, Mapping

from ..drafters.registry import NO_DRAFTER
from ..errors import InvalidRequest
from ..models import encode_prompt
from ..record import TextTable
from ..traffic import traffic_plan as plan
from ..traffic.levels_view import ConcurrencyView
from ..traffic.rates_view import TrafficView
from ..traffic.results import News
from ..traffic.runner import MODES, plan_levels, plan_rates
from ..traffic.simulator import held_out, project
from ..traffic.traffic_record import ConcurrencyRecord, TrafficRecord
from ..traffic.vllm_advice import measured_tables, vllm_advice
from ..workload.entrants import lane_entrants
from ..workload.prompts import GPU_LIMITS, check_workload
from .device_calls import take
from .request import Request, entry_rules, read_request

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
        """Plain decoding and each lane with every level's requests decoded together (traffic/runner.py, its levels
        mode), in one device call; a view after everything the concurrency sweep does, the last one final with its
        record."""
        levels = plan.check_levels(levels)
        rounds = plan.check_rounds(rounds)
        asked, chosen = self._entrants(values, prompts, lanes, best, session)
        view, runs = plan_levels(levels, chosen, asked.settings.greedy)
        began = time.perf_counter()
        views = self._run_points(
            asked, runs, plan.level_points(levels), "levels", rounds, prompts, view, stopped, session
        )
        pair, _ = yield from views
        models = pair.models(view.exact)
        self.level_tables.keep(session, asked.pair, measured_tables(view))
        view.advice = vllm_advice(view, models.draft)
        wall_s = time.perf_counter() - began
        view.saved = ConcurrencyRecord.of(view, prompts, asked.settings, models, wall_s, "the app")
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
        and by each lane with at most `max_rows` decoding together (traffic/runner.py, its rates mode), in one device
        call; a view after everything it does, the last one final: the simulator checked at each rate, vLLM's table,
        the record. Everything asked is checked before any model loads."""
        schedule_rates = plan.check_rates(rates)
        slo = plan.check_slo(*slo)
        rounds = plan.check_rounds(rounds)
        requests = plan.check_count(_whole(requests), "the number of requests", plan.MAX_REQUESTS)
        max_rows = plan.check_count(_whole(max_rows), "the most requests decoding at once", plan.MAX_ROWS)
        _check_arrivals_span(requests, min(schedule_rates))
        asked, chosen = self._entrants(values, prompts, lanes, best, session)
        schedules = {rate: plan.poisson_arrivals(rate, requests, asked.settings.seed) for rate in schedule_rates}
        view, runs = plan_rates(tuple(schedules), chosen, slo, rounds)
        began = time.perf_counter()
        points = plan.rate_points(schedules, max_rows)
        served = self._run_points(asked, runs, points, "rates", rounds, prompts, view, stopped, session)
        pair, lengths = yield from served
        held_out(view, dict(enumerate(lengths)), schedules, max_rows)  # each rate, predicted from the others
        project(view, dict(enumerate(lengths)), requests, max_rows, asked.settings.seed)  # and around them
        models = pair.models(view.exact)
        view.advice = vllm_advice(view, models.draft)
        wall_s = time.perf_counter() - began
        view.saved = TrafficRecord.of(view, prompts, lengths, max_rows, asked.settings, models, wall_s, "the app")
        yield view

    def _entrants(self, values: Mapping, prompts: list[str], lanes, best: bool, session: str):
        """The request read from the screen's values (its prompts readable before any model is asked for anything)
        and the lanes chosen, each an Entrant, with the rules of this pair and what this visitor's concurrency sweeps
        measured."""
        check_workload(prompts, GPU_LIMITS, 0, 1, 1)
        asked = read_request({**values, "prompt": prompts[0], "drafter": NO_DRAFTER}, self.shelf, session)
        rules = entry_rules(asked, self.shelf.preset(asked.pair), self.level_tables.of(session, asked.pair))
        return asked, lane_entrants(lanes, asked.settings, not best, rules)

    def _run_points(self, asked: Request, runs, points, mode: str, rounds, prompts, view, stopped, session):
        """The pair loaded and the run made in one device call, the view yielded after everything it hears; returns
        the pair and each prompt's length in its tokens. A run cut short ends stopped, its runs so far kept."""
        with self.line.on_device(session, len(points) * rounds * (1 + len(runs)), MODES[mode].device_words):
            for line in self._load(asked):
                view.message = line
                yield view
            pair = self.shelf.current()
            lengths = [len(encode_prompt(pair.target, p)) for p in prompts]
            call = self.calls.under_load(asked, runs, points, mode, rounds, tuple(prompts))
            view.exact = yield from _relay_news(call, view, stopped)
        if not view.finished:
            view.hear(News("end", MODES[mode].stopped, stopped=True))
        return pair, lengths


def _check_arrivals_span(requests: int, lowest: float) -> None:
    if requests / lowest > LONGEST_ARRIVALS_S:
        raise InvalidRequest(
            f"{requests} requests at {lowest:g}/s take about {requests / lowest / 60:.0f} "
            f"minutes of arrivals for each lane; here at most {LONGEST_ARRIVALS_S // 60} minutes: fewer requests "
            "or a higher rate"
        )


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
