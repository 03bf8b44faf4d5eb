"""The tiers hold what they promise: the fast tier (-m "not slow") keeps greedy identity with plain decoding for every
drafter on the menu, and leaves out every test that starts a server, drives a browser, loads a real model, draws a
sampled law or starts a new Python, each marked by the fixture it takes (tests/conftest.py)."""

from pathlib import Path

import pytest

from specviz.drafters.registry import kinds

ROOT = Path(__file__).resolve().parent.parent

# For each drafter on the menu, the test of its greedy output against plain decoding on the tiny models.
GREEDY_IDENTITY = {
    "draft": ("test_engine_greedy.py::test_speculative_greedy_equals_plain", "test_draft_tree.py::test_greedy_draft"),
    "hybrid": ("test_hybrid.py::test_greedy_hybrid_equals_plain",),
    "ngram": ("test_lookup.py::test_lookup_greedy_equals_plain[ngram",),
    "history": ("test_lookup.py::test_lookup_greedy_equals_plain[history",),
    "suffix": ("test_suffix.py::test_suffix_greedy_equals_plain",),
    "medusa": ("test_medusa_drafter.py::test_greedy_medusa_equals_plain",),
    "eagle": ("test_eagle.py::test_greedy_eagle_equals_plain",),
    "dflash": ("test_dflash.py::test_greedy_dflash_equals_plain",),
}


# One collection in a fresh process, each test's node id printed with its marks.
LIST_MARKS = """
import sys, pytest
class Marks:
    def pytest_collection_finish(self, session):
        for item in session.items:
            print("MARKS", item.nodeid, ",".join(sorted(m.name for m in item.iter_markers())), sep="\\t")
sys.exit(pytest.main(["--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider"], plugins=[Marks()]))
"""


def marks_of_every_test(new_process) -> dict[str, set[str]]:
    done = new_process("-c", LIST_MARKS, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [line.split("\t")[1:] for line in done.stdout.splitlines() if line.startswith("MARKS\t")]
    return {node: set(filter(None, marks.split(","))) for node, marks in rows}


@pytest.mark.budget(60, "collects the whole suite in a new process: every test module imported")
def test_the_fast_tier_keeps_every_drafters_greedy_identity_and_leaves_out_the_slow_kinds(new_process):
    marks = marks_of_every_test(new_process)
    fast = [node for node, m in marks.items() if "slow" not in m]
    heavy = [
        node
        for node, m in marks.items()
        if m & {"server", "browser", "model", "stats", "compiler", "thorough", "process"}
    ]
    assert all("slow" in marks[node] for node in heavy)
    assert set(GREEDY_IDENTITY) == {k.name for k in kinds(menu_only=True)}, "name the new drafter's greedy test here"
    for name, tests in GREEDY_IDENTITY.items():
        for test in tests:
            assert sum(f"tests/{test}" in node for node in fast) >= 2, f"{name}: {test} is not in the fast tier"
    assert heavy and not set(fast) & set(heavy)
    for module in ("test_app.py", "test_browser.py", "test_stage.py", "test_soak.py", "test_real_model.py"):
        assert any(f"tests/{module}::" in node for node in heavy), module  # marked by the fixtures they take
    for test in (
        "test_tree_view.py::test_in_a_browser",  # the browser fixture alone
        "test_compiled.py::test_a_race_through_the_compiled_forward_is_plain_decodings",  # compiling
        "test_properties.py::test_a_sampled_chain_emits_the_targets_law_exactly_thoroughly",  # thorough
        "test_zero_gpu.py::test_a_race_runs_in_a_worker",  # launch_app, through the module's own fixture
        "test_mutants.py::test_each_cache_or_position_mutant_fails_the_same_test",  # draws
        "test_vocab_edges.py::test_a_draft_with_a_cut_vocabulary_keeps_the_targets_law",
        "test_figure1.py::test_ui_never_imports_torch",  # new_process
        "test_registry.py::test_a_new_drafter_module_reaches_the_cli",  # new_process, through in_copy's caller
    ):
        assert any(f"tests/{test}" in node for node in heavy), test
