"""The screen built without a server: the race's components, declared once, are what /run and /replay return, in the
published order; a race update names only those components; every public element id and the API's endpoints are
there. No model: the race shown is a recorded one."""

import pytest

from specviz.app.ui.handlers import RECORDED
from specviz.app.ui.layout import build_app
from specviz.app.ui.race_screen import RaceScreen, race_update
from specviz.drafters.registry import kinds
from specviz.render.snapshot import final_view
from specviz.trace import Trace

# Element ids the browser tests, the stylesheet and the page's script find the screen by.
PUBLIC_IDS = (
    "sv-sidebar sv-pair sv-any-target sv-any-draft sv-add-pair sv-drafter sv-drafter-note sv-draft-dtype sv-adaptive "
    "sv-examples sv-presenter sv-prompt sv-run sv-compare sv-stop sv-status sv-echo sv-plain sv-spec sv-metrics "
    "sv-badge sv-tabs sv-fig1 sv-step-prev sv-step sv-step-next sv-explain sv-replay-rule sv-replay-step "
    "sv-replay-verdict sv-replay-chart sv-race-chart sv-diagnosis sv-time-chart sv-position-chart sv-compare-table "
    "sv-compare-chart sv-compare-plain sv-sweep sv-sweep-chart sv-recorded sv-upload sv-speed sv-replay sv-download "
    "sv-snapshot sv-summary sv-gp sv-gp-drafters sv-gp-setting sv-gp-lanes sv-gp-replay sv-gp-speed sv-production"
).split()
# What an API client reads from /run by position: the first nine are published (tests/test_app.py reads them).
RUN_RETURNS = ["Html"] * 7 + ["Plot", "Json", "Slider", "Downloadbutton", "Downloadbutton", "Html", "Plot", "Plot"]
RUN_RETURNS += ["Html", "Html"]  # the Grand Prix's lanes, which a race empties; take it to production


@pytest.fixture(scope="module")
def demo():
    return build_app(object(), ["pair A", "pair B"], kinds(menu_only=True), ["bfloat16", "float32"], 64, "same")


@pytest.fixture(scope="module")
def race(demo) -> RaceScreen:
    [listener] = [d for d in demo.fns.values() if d.api_name == "run"]
    return RaceScreen(*listener.outputs)


def test_the_race_endpoints_return_the_race_screen_in_its_declared_order(demo, race):
    api = demo.get_api_info()["named_endpoints"]
    assert {"/run", "/sweep", "/stop", "/load", "/compare", "/replay", "/add_pair"} <= set(api)
    assert [r["component"] for r in api["/run"]["returns"]] == RUN_RETURNS  # the trace, a State, is not returned
    assert [r["component"] for r in api["/replay"]["returns"]][: len(RUN_RETURNS)] == RUN_RETURNS
    [replayed] = [d for d in demo.fns.values() if d.api_name == "replay"]
    assert list(replayed.outputs)[: len(race.outputs())] == race.outputs()  # then the comparison tab's
    ids = [getattr(c, "elem_id", None) for c in race.outputs()]
    assert ids[:9] == ["sv-status", "sv-echo", "sv-plain", "sv-spec", "sv-fig1", "sv-metrics", "sv-badge"] + [
        "sv-race-chart",
        "sv-summary",
    ]


def test_the_run_endpoint_takes_its_parameters_in_the_published_order(demo):
    parameters = [p["parameter_name"] for p in demo.get_api_info()["named_endpoints"]["/run"]["parameters"]]
    assert (
        parameters[:17]
        == (
            "pair drafter dtype prompt gamma max_new temperature top_k top_p seed ngram_min candidates choice "
            "medusa_tree acceptance adaptive draft_dtype"
        ).split()
    )


def test_every_public_element_id_is_on_the_screen(demo):
    ids = [c["props"].get("elem_id") for c in demo.get_config_file()["components"]]
    assert not [i for i in PUBLIC_IDS if i not in ids]
    assert len([i for i in ids if i]) == len({i for i in ids if i})  # and each names one element


def test_a_race_update_names_only_the_race_screens_components(race):
    view = final_view(Trace.load(next(RECORDED.glob("*.json"))))
    live = race_update(race, view, "w1", chart=False)
    assert set(live) < set(race.outputs()) and race.race_plot not in live and race.trace not in live
    done = race_update(race, view, "w1", files=("run.json", "run.html"))
    assert set(done) == set(race.outputs())  # a recorded run fills every part of the race's screen
    assert done[race.trace] == done[race.download] == "run.json" and done[race.snapshot] == "run.html"
    assert done[race.summary]["finished"] and "sv-status-done" in done[race.status]
