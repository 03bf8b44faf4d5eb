"""A time budget for every test (a pytest plugin, loaded by conftest.py): a test whose call takes longer than its
tier allows fails, naming the budget, unless it carries `@pytest.mark.budget(seconds, why)`.

The budgets live in pyproject.toml (`fast_budget`, `slow_budget`: seconds for a test of the fast tier and for one
marked slow); `-o fast_budget=...` changes them for one run. Only the test's own call is timed: fixtures shared by
a module or the session (a tiny model, a server, a cluster) are built once and are not any one test's cost.
"""

import pytest

FAST, SLOW = "fast_budget", "slow_budget"


def pytest_addoption(parser):
    parser.addini(FAST, "seconds a fast-tier test's call may take", default="20")
    parser.addini(SLOW, "seconds a slow test's call may take", default="60")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "budget(seconds, why): this test may take `seconds`, for the reason given (tests/budget.py)"
    )


def allowed(item) -> tuple[float, str]:
    """The seconds `item` may take and where that figure comes from."""
    mark = item.get_closest_marker("budget")
    if mark is not None:
        seconds, why = (list(mark.args) + [None, None])[:2]
        if not isinstance(seconds, (int, float)) or seconds <= 0 or not isinstance(why, str) or not why.strip():
            raise pytest.UsageError(
                f"{item.nodeid}: write budget(seconds, why), e.g. budget(90, 'one law, 2,000 runs')"
            )
        return float(seconds), f"its own budget ({why})"
    tier = SLOW if item.get_closest_marker("slow") else FAST
    return float(item.config.getini(tier)), f"the {'slow' if tier == SLOW else 'fast'} tier's budget ({tier})"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.passed:
        return
    seconds, source = allowed(item)
    if call.duration > seconds:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} took {call.duration:.1f} s, over {source} of {seconds:g} s: make it faster, or give it "
            "@pytest.mark.budget(seconds, why) with the reason it needs the time"
        )
