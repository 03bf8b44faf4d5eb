"""What taking each drafter to another engine gives up, measured on the benchmark's own prompts: specviz's drafter
with adaptive γ (as the app runs it) beside what each engine would run in its place (as the drafter's kind declares
it, serving/engine_settings.py). vLLM and SGLang draft a fixed length per step, so they are stood in for by the
specviz drafter nearest to their method at its best fixed γ here; transformers is its own counterpart as raced, at its
default schedule, over its own plain decoding. Each figure is a speedup over plain decoding: the geometric mean over
the kinds and temperatures where both sides ran. Pure Python over BenchRows."""

import statistics

from ..events import PLAIN
from ..serving.declaration import Serving
from ..serving.engine_settings import ENGINES, stand_in
from .tally import drafters, figure, groups, markdown_table, mean

ADAPTIVE = "adaptive"


def nearest_table(rows) -> str:
    """One line per drafter (and draft model) that ran adaptive: its speedup, then each engine's nearest and its
    speedup on the same kinds and temperatures; '' when no drafter ran adaptive."""
    ours = [r for r in rows if r.library == "specviz" and r.method != PLAIN and r.exact is not False]
    known = drafters()
    counterparts = known.counterparts
    speed = {}  # (kind, T, method, draft, γ) -> mean speedup over the kind's prompts
    for key, rs in groups(ours, "kind", "temperature", "method", "draft_name", "draft_dtype", "gamma").items():
        speed[key] = mean(r.speedup for r in rs)
    theirs = {}  # (kind, T, transformers method, draft) -> its speedup at its default schedule
    transformers = [r for r in rows if r.library == "transformers" and r.gamma == ADAPTIVE]
    for key, rs in groups(transformers, "kind", "temperature", "method", "draft_name", "draft_dtype").items():
        theirs[key] = mean(r.speedup for r in rs)
    lines = []
    for method, *draft in dict.fromkeys((k[2], k[3], k[4]) for k in speed if k[-1] == ADAPTIVE):
        places = [k[:2] for k in speed if k[2:5] == (method, *draft) and k[-1] == ADAPTIVE]
        ran = {p: speed[(*p, method, *draft, ADAPTIVE)] for p in places}
        overall = _geo(ran.values())
        cells = []
        for engine in ENGINES:
            s = stand_in(engine, method, known.serving.get(method, Serving()))
            if s is None:  # the engine decodes plainly in its place
                cells.append(f"plain decoding: 1.00x ({figure(overall and 1 / overall)})")
                continue
            if engine == "transformers":
                them = {p: theirs.get((*p, counterparts.get(s), *draft)) for p in places}
                label = counterparts.get(s, s).removeprefix("transformers ")
            else:
                fixed = {p: _best_fixed(speed, p, s, tuple(draft)) for p in places}
                them = {p: f for p, (_, f) in fixed.items() if f is not None}
                gammas = sorted({g for g, f in fixed.values() if f is not None})
                label = f"{s} at fixed γ {'/'.join(map(str, gammas))}" if gammas else s
            both = [p for p in places if them.get(p) is not None]
            if not both:
                cells.append(f"{label}: not measured")
                continue
            mine = _geo(ran[p] for p in both)
            nearest = _geo(them[p] for p in both)
            cells.append(f"{label}: {nearest:.2f}x ({nearest / mine:.2f})")
        name = method + (f" ({draft[0]} {draft[1]})" if draft[1] else "")
        lines.append([name, figure(overall, "x"), *cells])
    if not lines:
        return ""
    titles = ["drafter", "specviz, adaptive", *(f"{e}: the nearest (÷ specviz's)" for e in ENGINES)]
    return markdown_table(titles, lines)


def _best_fixed(speed: dict, place: tuple, method: str, draft: tuple) -> tuple[int | None, float | None]:
    """The drafter's fastest fixed γ at one kind and temperature, with the draft given (or none, for a lookup)."""
    for d in (draft, (None, None)):
        fixed = {k[-1]: v for k, v in speed.items() if k[:5] == (*place, method, *d) and k[-1] != ADAPTIVE}
        fixed = {g: v for g, v in fixed.items() if v is not None}
        if fixed:
            g = max(fixed, key=fixed.get)
            return g, fixed[g]
    return None, None


def _geo(values) -> float | None:
    values = [v for v in values if v]
    return statistics.geometric_mean(values) if values else None
