"""The per-test time budget (tests/budget.py) on a scratch suite run inside this test: a test over its tier's budget
fails and names it; a slow test gets the slow tier's; a test's own budget, given with its reason, replaces both."""

SCRATCH = """
import time
import pytest

def test_quick():
    pass

def test_dawdles():
    time.sleep(0.5)

@pytest.mark.slow
def test_slow_dawdles():
    time.sleep(0.5)

@pytest.mark.budget(5, "sleeps half a second on purpose")
def test_dawdles_with_leave():
    time.sleep(0.5)

@pytest.mark.budget(0.1, "too little for what it does")
def test_overruns_its_own():
    time.sleep(0.5)
"""


def scratch_run(pytester, *options):
    pytester.makepyfile(test_scratch=SCRATCH)
    return pytester.runpytest_inprocess("-p", "budget", "-o", "fast_budget=0.25", "-o", "slow_budget=2", *options)


def test_a_test_over_its_tiers_budget_fails_naming_it(pytester):
    result = scratch_run(pytester)
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_dawdles took 0.* s, over the fast tier's budget (fast_budget) of 0.25 s*",
            "*test_overruns_its_own took 0.* s, over its own budget (too little for what it does) of 0.1 s*",
        ]
    )
    assert "test_slow_dawdles took" not in result.stdout.str()  # the slow tier allows it 2 s
    assert "test_dawdles_with_leave took" not in result.stdout.str()


def test_the_budgets_live_in_the_project_settings(pytester, pytestconfig):
    assert (float(pytestconfig.getini("fast_budget")), float(pytestconfig.getini("slow_budget"))) == (20, 60)
    scratch_run(pytester, "-o", "fast_budget=30").assert_outcomes(passed=4, failed=1)


def test_a_budget_without_its_reason_is_refused(pytester):
    pytester.makepyfile(test_scratch="import pytest\n\n@pytest.mark.budget(30)\ndef test_it():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "budget")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*write budget(seconds, why)*"])
