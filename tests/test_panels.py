"""What surrounds Figure 1: status, prompt echo, metrics strip, identity badge, charts. All escaped."""

from test_figure1 import Tags

from specviz.events import StepEvent
from specviz.render import charts, panels
from specviz.views.race import Divergence, Lane, RaceView
from specviz.views.sweep import SweepView

EVIL = '<img src=x onerror="alert(1)">'


def step(i, proposed=(), accepted=0, kind="plain", nxt=5, s=0.25):
    return StepEvent(
        index=i,
        proposed=tuple(proposed),
        accepted=accepted,
        next_token=nxt,
        next_kind=kind,
        p=tuple(0.9 for _ in proposed),
        q=None,
        draft_s=0.05 if proposed else 0.0,
        verify_s=s,
        step_s=s,
    )


def view(**over):
    plain = Lane("plain", [step(i) for i in range(8)], 2.0, True)  # 8 tokens in 2 s: 4 tok/s
    spec = Lane("speculative", [step(i, (5, 5, 5), 3, "bonus") for i in range(2)], 0.5, True)  # 8 tokens in 0.5 s
    return (
        RaceView(plain=plain, spec=spec, text_of=lambda t: EVIL if t == 7 else "tok", greedy=True, finished=True)
        if not over
        else RaceView(
            plain=plain,
            spec=spec,
            text_of=lambda t: EVIL if t == 7 else "tok",
            **({"greedy": True, "finished": True} | over),
        )
    )


def test_status_and_echo_escape_markup():
    for html in (panels.status(f"error: {EVIL}", "error"), panels.prompt_echo(f"<script>alert(1)</script>{EVIL}")):
        assert "<img" not in html and "<script" not in html
        assert [t for t, _ in Tags(html).tags] == ["div"] + (["b"] if "Prompt" in html else [])
    assert "alert(1)" in Tags(panels.prompt_echo("<script>alert(1)</script>")).text


def test_metrics_strip_shows_both_sides_and_the_speedup():
    html = panels.metrics_strip(view())
    text = Tags(html).text
    assert "4.00" in text and "16.00" in text and "4.00×" in text  # plain 4 tok/s, speculative 16 tok/s
    assert "τ" in text and "4.00" in text  # 8 tokens over 2 target forwards
    assert 'title="tokens per target forward (per step)">τ<' in html  # the short header explains itself on hover


def test_badge_for_identical_outputs():
    assert "identical to plain decoding: all 8 tokens match" in Tags(panels.identity_badge(view())).text
    exact = Tags(panels.identity_badge(view(exact="exact mode"))).text
    assert "all 8 tokens match; bit for bit by construction: in exact mode" in exact
    assert "by construction" not in Tags(panels.identity_badge(view(exact="exact mode off"))).text


def test_badge_explains_a_divergence_with_escaped_tokens():
    d = Divergence(3, EVIL, " M", ((EVIL, 0.451), (" M", 0.398)))
    html = panels.identity_badge(view(divergence=d))
    assert "<img" not in html and "sv-badge-diff" in html
    text = Tags(html).text
    assert "token 4" in text and "0.451" in text and "0.398" in text and "margin 0.053" in text
    assert "\u00b7M" in text  # the leading space is drawn
    assert "near tie like this can flip" in text and "Exact mode (on by default for a bfloat16 target" in text
    off = Tags(panels.identity_badge(view(divergence=d, exact="exact mode off: it covers bfloat16 targets"))).text
    assert "(exact mode off: it covers bfloat16 targets)" in off
    impossible = Tags(panels.identity_badge(view(divergence=d, exact="exact mode"))).text
    assert "In exact mode this should not happen: please report it" in impossible and "near tie" not in impossible


def test_badge_for_sampled_and_unfinished_runs():
    assert "same distribution" in Tags(panels.identity_badge(view(greedy=False))).text
    assert "after the run" in Tags(panels.identity_badge(view(finished=False))).text


def test_race_chart_ends_at_each_sides_tokens_per_second():
    fig = charts.race_chart(view())
    plain, spec = fig.data
    assert plain.name == "plain" and spec.name == "speculative"
    assert plain.y[-1] == 4.0 and spec.y[-1] == 16.0 and plain.x[-1] == 2.0


def test_sweep_chart_draws_measured_points_theory_and_the_best_gamma():
    sweep = SweepView(gammas=(1, 2), finished=True)
    sweep.plain = [step(i) for i in range(8)]
    sweep.runs = {
        1: [step(i, (5,), 1, "bonus") for i in range(4)],
        2: [step(i, (5, 5), 1, "correction") for i in range(4)],
    }
    fig = charts.sweep_chart(sweep)
    names = [t.name for t in fig.data]
    assert any(n.startswith("theory: α=") for n in names) and "best measured γ = 1" in names
    theory = next(t for t in fig.data if t.name.startswith("theory"))
    assert list(theory.x) == [1, 2] and len(theory.y) == 2


def test_the_position_charts_count_axis_keeps_its_top_tick_below_the_subplot_title():
    """Whole-number ticks of the steps per accepted count, the highest of them under the axis's top: a tick label at
    the very top would reach into the subplot's title above it (as 20 did, for 20 steps of one count)."""
    for steps in (20, 3, 1):
        events = [step(i, (5, 5, 5), 3, "bonus") for i in range(steps)]
        axis = charts.position_chart(events).layout.yaxis2
        assert all(float(v).is_integer() for v in axis.tickvals) and max(axis.tickvals) >= steps
        assert max(axis.tickvals) < axis.range[1]
