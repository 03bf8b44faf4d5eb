"""The power of the law tests, stated and held: for each law test, the smallest shift of probability mass between
the two likeliest outcomes that its number of draws refuses at its significance at least 90% of the time (laws.py,
`smallest_shift`, with the tests' own chi-square). A test whose draws are cut below what its stated figure needs
fails here. `python -m pytest -n 0 -s tests/test_law_power.py` prints the table docs/testing.md carries."""

from inspect import signature

import pytest
import test_acceptance_laws as fast_laws
import test_batch
import test_mutants
import test_verify
from laws import RUNS, exact_law, smallest_shift

from specviz.settings import Settings

SAMPLED = Settings(max_new_tokens=3, gamma=2, temperature=1.0)
SOUND = 1e-3  # every law test calls a rule sound above this p-value


def _verdict_chain(_):
    return dict(enumerate(test_verify.P[0].tolist())), test_verify.DRAWS


def _fast(_):
    return dict(enumerate(fast_laws.target_after(()).tolist())), fast_laws.DRAWS


def _engine(fixtures):
    target, _, prompt = fixtures["small"]
    return exact_law(target, prompt, SAMPLED), RUNS


def _batch_row(fixtures):
    target, _, prompt = fixtures["small"]
    return exact_law(target, prompt, SAMPLED), signature(test_batch.row_p_values).parameters["runs"].default


def _sensitive(runs):
    def source(fixtures):
        target, _, tok = fixtures["sensitive"]
        return exact_law(target, tok.encode("a b c d"), test_mutants.SETTINGS, test_mutants.HORIZON), runs

    return source


# (law test, where its law and draws come from, the shift it is stated to see)
STATED = [
    ("tests/test_verify.py: the sampled chain, per position (verdicts)", _verdict_chain, 0.02),
    ("tests/test_acceptance_laws.py: each rule, first position (verdicts)", _fast, 0.035),
    ("engine laws on the `small` pair, first two tokens (whole runs)", _engine, 0.06),
    ("tests/test_batch.py: each row of a batch, first two tokens (whole runs)", _batch_row, 0.06),
    (
        "tests/test_mutants.py (chain), test_eagle.py, test_dflash.py: first four tokens (whole runs)",
        _sensitive(test_mutants.RUNS),
        0.055,
    ),
    ("tests/test_mutants.py (tree): first four tokens (whole runs)", _sensitive(test_mutants.TREE_RUNS), 0.03),
]


@pytest.mark.parametrize("name, source, stated", STATED, ids=[s[0].split(":")[0] for s in STATED])
def test_each_law_test_sees_the_shift_it_states(small, sensitive, name, source, stated):
    law, draws = source({"small": small, "sensitive": sensitive})
    shift = smallest_shift(law, draws, below=SOUND)
    print(f"\n| {name} | {draws:,} | {len(law)} | p < {SOUND:g} | {shift:.3f} | {stated} |")
    assert shift <= stated, f"{name}: {draws} draws see a shift of {shift}, not the {stated} stated"
