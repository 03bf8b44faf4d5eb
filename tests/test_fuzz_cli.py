"""The command line under fuzz: flags given values a machine chose (wrong types, huge and negative numbers, NaN,
empty and very long strings, undecodable bytes as Python passes them on, markup, control characters) and prompt
files of junk. Every answer is exit 2 with one `error:` line that names what was wrong, never a traceback, and
nothing is written. The target never exists, so no model loads: what is checked is everything checked before one
would."""

import re
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from specviz.cli import main
from specviz.drafters.registry import option_owners

NOWHERE = "/nonexistent/specviz-model"

junk_value = st.one_of(
    st.sampled_from(["", "nan", "-nan", "inf", "-1", "0", "1e309", "0x10", "9" * 400, "1.5", "true", "None"]),
    st.sampled_from(["\udcff", "<b>x</b>", "\x1b[31m", "\x00", "x" * 10_000, "--gamma", "-"]),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.text(max_size=12),
)
GENERAL = {  # flag: what its error line calls it (the flag's letters, or the field's words)
    "--gamma": "gamma",
    "--max-new-tokens": "max new tokens",
    "--temperature": "temperature",
    "--top-k": "top-k",
    "--top-p": "top-p",
    "--seed": "seed",
    "--acceptance": "acceptance",
    "--drafter": "drafter",
    "--prompt": "prompt",
    "--dtype": "dtype",
    "--device": "device",
}
OPTIONS = {spec.cli_flag: spec.label for _, spec in option_owners() if spec.cli}


def letters(text: str) -> str:
    return re.sub("[^a-z]", "", text.lower())


def named(line: str, flag: str) -> bool:
    """The line names the flag (its letters), the field's words, or the model it could not find."""
    words = GENERAL.get(flag) or OPTIONS.get(flag, "")
    return letters(flag) in letters(line) or letters(words) in letters(line) or NOWHERE in line


def run(argv, capsys) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(argv)
    return code, capsys.readouterr().err.strip().splitlines()


@settings(max_examples=80)
@given(flag=st.sampled_from(sorted({**GENERAL, **OPTIONS})), value=junk_value)
def test_generate_with_one_junk_flag_is_one_line_naming_it(capsys, flag, value):
    argv = ["generate", "--target", NOWHERE, "--prompt", "hello", flag, value]
    if flag == "--prompt":
        argv = ["generate", "--target", NOWHERE, "--prompt", value]
    code, lines = run(argv, capsys)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), lines[:5]
    assert len(lines[0]) < 600 and named(lines[0], flag), lines[0][:300]


def test_a_pasted_essay_as_a_choice_is_quoted_only_in_part(capsys):
    """argparse quotes a bad choice back whole; the error line keeps its first words and the choices."""
    code, lines = run(["generate", "--target", NOWHERE, "--prompt", "hi", "--acceptance", "x" * 10_000], capsys)
    assert code == 2 and len(lines) == 1 and len(lines[0]) < 300 and "'greedy'" in lines[0], lines[0][:300]


@settings(max_examples=40)
@given(st.lists(st.tuples(st.sampled_from(sorted(GENERAL)), junk_value), min_size=1, max_size=4))
def test_race_and_bench_with_junk_flags_are_one_line(capsys, flags):
    for command in (["race", "--prompt", "hello"], ["bench", "--kinds", "code", "--repeats", "1"]):
        argv = [*command, "--target", NOWHERE, *[x for pair in flags for x in pair]]
        code, lines = run(argv, capsys)
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (argv[:8], lines[:5])


prompt_file = st.sampled_from([".txt", ".jsonl", ".csv", ".md", ""]).flatmap(
    lambda suffix: st.tuples(
        st.just(suffix),
        st.one_of(
            st.binary(max_size=300),
            st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")),
            st.lists(st.one_of(st.text(max_size=20), st.sampled_from(['{"prompt": 1}', '{"x": "y"}', "[]", '"'])))
            .map("\n".join)
            .map(lambda t: t.encode("utf-8", "surrogatepass")),
        ),
    )
)


@settings(max_examples=80)
@given(prompt_file)
def test_a_junk_prompt_file_is_one_line_and_no_report(capsys, case):
    suffix, content = case
    with tempfile.TemporaryDirectory() as folder:
        prompts, out = Path(folder) / f"prompts{suffix}", Path(folder) / "report.html"
        prompts.write_bytes(content)
        code, lines = run(["workload", "--prompts", str(prompts), "--out", str(out), "--target", NOWHERE], capsys)
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), lines[:5]
        assert len(lines[0]) < 600
        assert sorted(p.name for p in Path(folder).iterdir()) == [prompts.name]  # nothing written
