"""The llama.cpp runtime from the command line: --runtime on generate, the choice and its check in --json, and one
`error:` line with exit 2 for every bad input (a missing or damaged GGUF, a draft of no shared vocabulary, llama.cpp
not installed, a precision llama.cpp has not)."""

import json

import pytest
from test_cli import assert_one_line_error, run_cli
from tiny import tiny_llama, word_tokenizer
from tiny_gguf import save_gguf


@pytest.fixture(scope="module")
def ggufs(tmp_path_factory, target, drafts, tokenizer):
    """Folders each holding a GGUF and the tokenizer its ids are spelled by: the tiny target, its partly agreeing
    draft, a draft of another vocabulary; and files that are no GGUF llama.cpp could load."""
    root = tmp_path_factory.mktemp("gguf-cli")
    made = {}
    for name, model, tok in (
        ("target", target.model, tokenizer),
        ("draft", drafts["partial"].model, tokenizer),
        ("other", tiny_llama(42, seed=5), word_tokenizer([f"x{i}" for i in range(40)])),
    ):
        (root / name).mkdir()
        save_gguf(model, root / name / f"{name}.gguf")
        tok.save_pretrained(root / name)
        made[name] = root / name
    (root / "not-gguf.gguf").write_bytes(b"PK\x03\x04 a zip, not a model" * 4)
    whole = (made["target"] / "target.gguf").read_bytes()
    (root / "cut.gguf").write_bytes(whole[: len(whole) // 3])  # its header promises tensors the file lacks
    return {**made, "not-gguf": root / "not-gguf.gguf", "cut": root / "cut.gguf"}


def llama(target, *extra):
    return ["generate", "--target", str(target), "--runtime", "llama.cpp", "--prompt", "w1 w2 w3 w1 w2", *extra]


def test_generate_on_llama_cpp_says_which_runtime_and_checks_its_prediction(capsys, ggufs):
    code, out, err = run_cli(capsys, *llama(ggufs["target"], "--max-new-tokens", "16", "--json", "--no-chat"))
    assert code == 0, err
    plain = json.loads(out)
    code, out, err = run_cli(
        capsys,
        *llama(ggufs["target"], "--drafter", "draft", "--draft", str(ggufs["draft"]), "--max-new-tokens", "16"),
        "--json",
        "--no-chat",
        "--gamma",
        "3",
        "--no-adaptive",  # adaptive γ would price the tiny draft, as dear as its target, out of drafting
    )
    assert code == 0, err
    spec = json.loads(out)
    assert spec["token_ids"] == plain["token_ids"] and spec["metrics"]["acceptance_rate"] > 0
    runtime = spec["runtime"]
    assert runtime["runtime"] == "llama.cpp" and runtime["asked"] == "llama.cpp"
    plan = runtime["plans"]["llama.cpp"]
    assert plan["plain_tok_s"] > 0 and plan["verify_5_forwards"] > 0 and plan["draft_forwards"] > 0
    check = runtime["check"]
    assert check["measured_tok_s"] == pytest.approx(spec["metrics"]["tokens_per_s"], rel=0.01)
    assert check["stands"] == (
        abs(check["predicted_at_run_alpha_tok_s"] - check["measured_tok_s"]) <= 0.15 * check["measured_tok_s"]
    )
    assert ("the choice stands" in check["line"]) == check["stands"]
    assert not spec["exact"] and "llama.cpp" in spec["exact_mode"]


def test_auto_takes_llama_cpp_for_a_gguf_file_and_transformers_for_a_folder(capsys, ggufs, model_folder):
    code, out, err = run_cli(
        capsys, "generate", "--target", str(ggufs["target"] / "target.gguf"), "--prompt", "w1", "--max-new-tokens",
        "4", "--json", "--runtime", "auto", "--dtype", "auto", "--no-chat",
    )  # fmt: skip
    assert code == 0, err
    assert (
        json.loads(out)["runtime"]["runtime"] == "llama.cpp"
        and "only llama.cpp" in json.loads(out)["runtime"]["reason"]
    )
    code, out, err = run_cli(
        capsys, "generate", "--target", str(model_folder), "--prompt", "w1", "--max-new-tokens", "4", "--json",
        "--runtime", "auto", "--dtype", "float32", "--device", "cpu",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["runtime"]["runtime"] == "transformers"


@pytest.mark.parametrize(
    "which, extra, needles",
    [
        ("missing", (), ("nothing-here.gguf", "is not a GGUF file")),
        ("not-gguf", (), ("not a GGUF file", "PK")),
        ("cut", (), ("could not load",)),
        ("target", ("--drafter", "draft", "--draft", "other"), ("shares no vocabulary",)),
        ("target", ("--dtype", "int8"), ("--dtype", "quantisation")),
        ("target", ("--exact",), ("no exact mode",)),
    ],
)
def test_each_bad_input_is_one_line(capsys, ggufs, tmp_path, which, extra, needles):
    target = tmp_path / "nothing-here.gguf" if which == "missing" else ggufs[which]
    extra = [str(ggufs["other"]) if e == "other" else e for e in extra]
    assert_one_line_error(*run_cli(capsys, *llama(target, "--max-new-tokens", "4", *extra))[::2], *needles)


def test_llama_cpp_not_installed_is_one_line(capsys, ggufs, monkeypatch):
    import specviz.runtimes.llama_cpp.binding as binding

    def missing():
        raise binding.LlamaCppMissing(f"llama.cpp is not installed (no module named 'llama_cpp'); {binding.INSTALL}")

    monkeypatch.setattr(binding, "library", missing)
    assert_one_line_error(*run_cli(capsys, *llama(ggufs["target"], "--max-new-tokens", "4"))[::2], "not installed")


def test_a_workload_runs_on_llama_cpp_and_bench_and_the_trainers_say_where_they_run(capsys, ggufs, tmp_path):
    prompts = tmp_path / "mine.txt"
    prompts.write_text("w1 w2 w3 w1 w2 w3\n\nw4 w5 w4 w5\n", encoding="utf-8")
    out = tmp_path / "report.html"
    args = ["workload", "--target", str(ggufs["target"]), "--prompts", str(prompts), "--out", str(out)]
    code, _, err = run_cli(capsys, *args, "--runtime", "llama.cpp", "--drafters", "ngram", "--max-new-tokens", "8")
    assert code == 0, err
    assert "llama.cpp" in out.read_text(encoding="utf-8")
    bench = ["bench", "--target", str(ggufs["target"]), "--runtime", "llama.cpp"]
    assert_one_line_error(*run_cli(capsys, *bench)[::2], "llama_race.py")
    train = ["train-medusa", "--base", str(ggufs["target"]), "--out", str(tmp_path / "heads"), "--runtime", "llama.cpp"]
    assert_one_line_error(*run_cli(capsys, *train)[::2], "transformers")
