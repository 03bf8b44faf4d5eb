"""The "Your prompts" tab at work: the visitor's prompts (pasted or uploaded) run by every chosen drafter against
plain decoding, a progress bar with the time left as measured so far, a per-drafter table and a prompt-by-drafter
grid that fill in as runs finish, and, at the end (or at Stop), the report and its CSV to download. No torch here."""

import time
import uuid
from html import escape

import gradio as gr

from ...errors import InvalidRequest
from ...events import PLAIN
from ...render import html_table, panels
from ...render.report import write_report
from ...workload.prompts import read_prompts, split_pasted
from ...workload.view import WorkloadView, duration

BEST = "each drafter's best"  # the draft-length choice that runs every drafter at its measured best γ
FIXED = "the γ in the settings"  # the other: every drafter at the sidebar's γ and adaptive choice
UPDATE_EVERY_S = 0.5


def prompts_from(pasted: str | None, uploaded) -> list[str]:
    """The uploaded file's prompts when there is one, else the pasted ones."""
    if uploaded:
        path = getattr(uploaded, "path", None) or getattr(uploaded, "name", None) or str(uploaded)
        shown = getattr(uploaded, "orig_name", None)
        return read_prompts(path, name=shown or path.rsplit("/", 1)[-1])
    prompts = split_pasted(pasted or "")
    if not prompts:
        raise InvalidRequest("no prompts: paste some (one per line, or blank-line blocks) or upload a file")
    return prompts


def progress_bar(view: WorkloadView) -> str:
    """How far the workload has got, what runs now, and the time left from the speeds measured so far."""
    share = view.progress()
    done = sum(c.done for c in view.cells.values())
    total = len(view.prompts) * len(view.sides)
    left = view.seconds_left()
    if view.finished:
        tail = f"{view.message}; {done} of {total} runs in {duration(view.wall_s)}"
    else:
        estimate = "time left: measuring…" if left is None else f"about {duration(left)} left (from measured speeds)"
        tail = f"{view.message} · {done} of {total} runs done · {estimate}"
    kind = "sv-stopped" if view.stopped else "sv-done" if view.finished else "sv-busy"
    return (
        f'<div class="sv-progress {kind}" role="progressbar" aria-valuemin="0" aria-valuemax="100" '
        f'aria-valuenow="{share * 100:.0f}"><div class="sv-progress-fill" style="width: {share * 100:.1f}%"></div>'
        f'</div><div class="sv-progress-text">{escape(tail)}</div>'
    )


def _cell(value: float | None, pattern: str) -> str:
    return "–" if value is None else pattern.format(value)


def summary_table(view: WorkloadView) -> str:
    """A row per side: its totals over the prompts it and plain decoding both finished."""
    head = ("drafter", "speedup", "tokens/s", "α", "τ", "identical to plain", "prompts", "")
    rows = view.rows()
    best = max((r.speedup or 0 for r in rows[1:]), default=0)
    body = []
    for r in rows:
        same = "the reference" if r.name == PLAIN else "sampled" if not view.greedy else "–"
        same = f"{r.identical}/{r.prompts}" if r.identical is not None and r.name != PLAIN else same
        cells = (
            r.name,
            _cell(r.speedup, "{:.2f}×"),
            _cell(r.tokens_per_s, "{:.1f}"),
            _cell(r.alpha, "{:.2f}"),
            _cell(r.tau, "{:.2f}"),
            same,
            f"{r.prompts}/{len(view.prompts)}",
            r.note,
        )
        lead = "sv-best" if r.name != PLAIN and r.speedup and r.speedup == best and best > 1 else ""
        body.append(html_table.row(map(str, cells), lead))
    return html_table.table("sv-workload", head, body)


def speedup_grid(view: WorkloadView) -> str:
    """Prompt by drafter: each finished run's speedup, the run under way marked, the rest waiting."""
    names = view.sides[1:]
    body = []
    for i, prompt in enumerate(view.prompts):
        cells = []
        for name in names:
            found = view.cells.get((i, name))
            speed = view.speedup(i, name)
            text = (
                _cell(speed, "{:.2f}×")
                if speed is not None
                else "running…"
                if view.running == (i, name)
                else found.note
                if found is not None and found.note
                else "·"
            )
            cells.append(f"<td>{escape(text)}</td>")
        short = prompt if len(prompt) <= 60 else prompt[:59] + "…"
        body.append(f'<tr><td title="{escape(prompt)}">{i + 1}. {escape(short)}</td>{"".join(cells)}</tr>')
    return html_table.table("sv-grid", ["prompt", *names], body)


class WorkloadHandlers:
    """Mixed into the screen's Handlers: the workload's run and what it shows."""

    def workload(self, request: gr.Request, prompts_text, prompts_file, drafters, draft_length, **values):
        s = self.screen
        session = request.session_hash
        with self.on_device(session) as flag:
            try:
                prompts = prompts_from(prompts_text, prompts_file)
                runs = self.backend.workload(
                    values, prompts, list(drafters or []), draft_length != BEST, flag.is_set, session
                )
                shown = 0.0
                runs_done = 0
                for view in runs:  # every finished run shows at once; a run under way, every UPDATE_EVERY_S
                    done = sum(c.done for c in view.cells.values())
                    if view.finished or done > runs_done or time.perf_counter() - shown >= UPDATE_EVERY_S:
                        shown = time.perf_counter()
                        runs_done = done
                        yield self.workload_outputs(view)
            except Exception as exc:  # one line in the tab and in the status box; the server keeps serving
                yield {s.workload_progress: panels.failure(exc), s.status: panels.failure(exc)}

    def workload_outputs(self, view: WorkloadView) -> dict:

        s = self.screen
        out = {
            s.status: panels.status(f"your prompts: {view.message}", "done" if view.finished else "busy"),
            s.workload_progress: progress_bar(view),
            s.workload_table: summary_table(view) + speedup_grid(view),
        }
        if view.finished:
            stem = self.files / f"specviz-report-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
            html, csv = write_report(view, stem.with_suffix(".html"))
            out[s.workload_report], out[s.workload_csv] = str(html), str(csv)
        return out
