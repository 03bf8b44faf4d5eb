"""The files a visitor hands specviz, damaged by a machine: a recorded trace with any one field replaced by junk
(wrong types, huge and negative numbers, NaN, empty and long strings, lone surrogates, markup, control characters)
or taken away. `specviz snapshot` either writes a page, with every text escaped, or says in one line what is wrong
and writes nothing; never a traceback."""

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specviz.cli import main
from specviz.runs import Duel
from specviz.runtimes.pair import Pair
from specviz.settings import Settings
from specviz.trace import RunModels

FAST, MANY = 60, 600

MARKUP = '<script>alert("x")</script>'
junk_text = st.one_of(
    st.just(""),
    st.just(MARKUP),
    st.just("\ud800"),  # a lone surrogate: no UTF-8 encoding exists for it
    st.just("\x00\x1b[2J\r"),
    st.just("x" * 100_000),
    st.text(max_size=20),
)
junk_number = st.one_of(
    st.integers(-(2**70), 2**70),
    st.just(2**64),
    st.just(-1),
    st.floats(allow_nan=True, allow_infinity=True),
)
junk_leaf = st.one_of(st.none(), st.booleans(), junk_number, junk_text)
junk = st.one_of(junk_leaf, st.lists(junk_leaf, max_size=3), st.dictionaries(junk_text, junk_leaf, max_size=3))
GONE = object()


@pytest.fixture(scope="module")
def recorded(target, drafts) -> dict:
    """A real race's trace, as JSON data: the thing to damage."""
    duel = Duel(Pair(target, drafts["partial"]), [1, 5, 9, 13], Settings(max_new_tokens=12, gamma=3), "draft")
    list(duel.speculative())
    list(duel.plain())
    models = RunModels(target="tiny", draft="tiny-partial", pair="tiny ← tiny-partial", precision="float32")
    return duel.trace("a prompt", models, "a test").to_json()


@st.composite
def damaged(draw, data: dict):
    """`data` with one value somewhere in it replaced by junk, or removed."""
    data = json.loads(json.dumps(data))
    node, key = None, None
    here = data
    while isinstance(here, (dict, list)) and here and (node is None or draw(st.booleans())):
        keys = list(here) if isinstance(here, dict) else list(range(len(here)))
        node, key = here, draw(st.sampled_from(keys))
        here = node[key]
    value = draw(st.one_of(junk, st.just(GONE)))
    if value is GONE and isinstance(node, dict):
        del node[key]
    elif node is not None:
        node[key] = None if value is GONE else value
    return data


def check_snapshot(case, capsys):
    with tempfile.TemporaryDirectory() as folder:
        trace, out = Path(folder) / "run.json", Path(folder) / "page.html"
        trace.write_text(json.dumps(case, ensure_ascii=True), encoding="utf-8")
        capsys.readouterr()
        code = main(["snapshot", str(trace), "--out", str(out)])
        said = capsys.readouterr()
        if code == 0:
            page = out.read_text(encoding="utf-8")
            assert MARKUP not in page, "junk text reached the page unescaped"
        else:
            assert code == 2 and not out.exists(), said
            lines = said.err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: ") and len(lines[0]) < 600, said.err[:2000]
        return code


@settings(max_examples=FAST)
@given(data=st.data())
def test_a_damaged_trace_is_a_page_or_one_line(recorded, capsys, data):
    check_snapshot(data.draw(damaged(recorded)), capsys)


@settings(max_examples=MANY)
@given(data=st.data())
def test_a_damaged_trace_is_a_page_or_one_line_thoroughly(thorough, recorded, capsys, data):
    check_snapshot(data.draw(damaged(recorded)), capsys)


FOUND = [  # (where, the junk put there): cases the fuzzing above found, each a traceback before it was mended
    (("texts",), None),  # AttributeError: 'NoneType' object has no attribute 'items'
    (("created",), None),  # TypeError at drawing time: 'NoneType' object is not subscriptable
    (("prompt",), "\ud800"),  # UnicodeEncodeError when the page was written
    (("version",), "x" * 100_000),  # a one-line error 100,000 characters long
    (("wall_s",), float("nan")),
]


@pytest.mark.parametrize("where, junk", FOUND, ids=[".".join(map(str, w)) for w, _ in FOUND])
def test_the_damage_the_fuzzing_found_is_one_line(recorded, capsys, where, junk):
    case = json.loads(json.dumps(recorded))
    node = case
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = junk
    assert check_snapshot(case, capsys) == 2
