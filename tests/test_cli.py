"""The CLI contract: JSON output, and one `error: ...` line with exit 2 for every bad input."""

import json
import os
from pathlib import Path

import pytest
from tiny import tiny_llama, word_tokenizer

from specviz.cli import main

ROOT = Path(__file__).resolve().parent.parent


def run_cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *needles):
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def other_vocab_folder(tmp_path_factory):
    tok = word_tokenizer([f"x{i}" for i in range(40)])
    folder = tmp_path_factory.mktemp("other-vocab")
    tiny_llama(len(tok), seed=5).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def gen(folder, *extra):
    return ["generate", "--target", str(folder), "--dtype", "float32", "--device", "cpu", *extra]


def test_json_output(capsys, model_folder):
    code, out, err = run_cli(
        capsys,
        *gen(
            model_folder,
            "--draft",
            str(model_folder),
            "--prompt",
            "w1 w2 w3",
            "--max-new-tokens",
            "12",
            "--gamma",
            "3",
            "--json",
            "--draft-dtype",
            "float32",
        ),
    )  # the target's own precision (int8 by default)
    assert code == 0, err
    data = json.loads(out)
    assert set(data) >= {"text", "token_ids", "steps", "metrics"}
    assert len(data["token_ids"]) == 12 and data["metrics"]["new_tokens"] == 12
    assert data["metrics"]["acceptance_rate"] == 1.0  # drafting for itself
    assert [t for s in data["steps"] for t in s["proposed"][: s["accepted"]] + [s["next"]]] == data["token_ids"]
    assert {s["next_kind"] for s in data["steps"]} <= {"bonus", "plain"}
    for key in (
        "tokens_per_s",
        "mean_tokens_per_step",
        "target_forwards",
        "draft_forwards",
        "draft_s",
        "verify_s",
        "total_s",
    ):
        assert key in data["metrics"]
    positions = data["metrics"]["by_position"]  # drafting for itself: every tested position accepted
    assert len(positions) == 3 and all(tested == accepted > 0 for tested, accepted in positions)
    assert sum(data["metrics"]["accepted_lengths"]) == sum(bool(s["proposed"]) for s in data["steps"])


def test_the_text_output_gives_acceptance_by_position(capsys, model_folder, tmp_path):
    unrelated = tmp_path / "unrelated"
    tiny_llama(62, seed=2).save_pretrained(unrelated)
    word_tokenizer([f"w{i}" for i in range(60)]).save_pretrained(unrelated)
    code, _, err = run_cli(
        capsys,
        *gen(model_folder, "--draft", str(unrelated), "--prompt", "w1 w2 w3", "--max-new-tokens", "24", "--gamma", "3"),
    )
    assert code == 0, err
    line = next(x for x in err.splitlines() if x.startswith("alpha by draft position: "))
    entries = line.removeprefix("alpha by draft position: ").split(", ")
    assert [e.split(":")[0] for e in entries] == ["1", "2", "3"] and "/" in entries[0]
    assert not any(x.startswith("why: ") for x in err.splitlines())  # no plain run, nothing to compare with
    code, out, err = run_cli(
        capsys,
        *gen(
            model_folder,
            "--draft",
            str(unrelated),
            "--prompt",
            "w1 w2 w3",
            "--max-new-tokens",
            "24",
            "--gamma",
            "3",
            "--diagnose",
        ),
    )
    why = next(x for x in err.splitlines() if x.startswith("why: speedup "))
    assert "measured" in why and "predicted" in why
    code, out, _ = run_cli(
        capsys,
        *gen(
            model_folder,
            "--draft",
            str(unrelated),
            "--prompt",
            "w1 w2 w3",
            "--max-new-tokens",
            "24",
            "--gamma",
            "3",
            "--diagnose",
            "--json",
        ),
    )
    found = json.loads(out)["diagnosis"]
    assert found["measured"] > 0 and found["culprit"] in ("", "acceptance", "draft", "verify", "overhead")


def test_plain_and_speculative_agree_through_the_cli(capsys, model_folder):
    outputs = []
    for extra in ([], ["--drafter", "draft", "--draft", str(model_folder), "--gamma", "5"]):
        code, out, _ = run_cli(
            capsys, *gen(model_folder, "--prompt", "w7 w8", "--max-new-tokens", "20", "--json", *extra)
        )
        outputs.append(json.loads(out))
    assert outputs[0]["token_ids"] == outputs[1]["token_ids"] and outputs[0]["text"] == outputs[1]["text"]
    assert all(s["next_kind"] == "plain" and s["proposed"] == [] for s in outputs[0]["steps"])


BAD_SETTINGS = [
    (["--prompt", ""], "prompt is empty"),
    (["--prompt", "   \n\t"], "prompt is empty"),
    (["--prompt", "w1", "--max-new-tokens", "0"], "max new tokens"),
    (["--prompt", "w1", "--max-new-tokens", "-3"], "max new tokens"),
    (["--prompt", "w1", "--max-new-tokens", "5000"], "4096"),
    (["--prompt", "w1", "--gamma", "0"], "gamma"),
    (["--prompt", "w1", "--gamma", "33"], "1..32"),
    (["--prompt", "w1", "--temperature", "-0.5"], "temperature"),
    (["--prompt", "w1", "--temperature", "nan"], "temperature"),
    (["--prompt", "w1", "--temperature", "inf"], "temperature"),
    (["--prompt", "w1", "--top-p", "0"], "top-p"),
    (["--prompt", "w1", "--top-p", "1.5"], "top-p"),
    (["--prompt", "w1", "--top-k", "-1"], "top-k"),
    (["--prompt", "w1", "--gamma", "four"], "gamma"),
    (["--prompt", "w1", "--drafter", "draft"], "--draft"),
    (["--prompt", "w1", "--dtype", "float8"], "dtype"),
]


@pytest.mark.parametrize("extra,needle", BAD_SETTINGS, ids=[" ".join(a) for a, _ in BAD_SETTINGS])
def test_bad_settings(capsys, model_folder, extra, needle):
    assert_one_line_error(*run_cli(capsys, *gen(model_folder, *extra))[::2], needle)


def test_prompt_longer_than_the_context(capsys, model_folder):
    code, _, err = run_cli(capsys, *gen(model_folder, "--no-chat", "--prompt", " ".join(["w1"] * 600)))
    assert_one_line_error(code, err, "600 tokens", "512")


def test_unknown_model_names(capsys, tmp_path):
    assert_one_line_error(
        *run_cli(capsys, *gen("no-such-model", "--prompt", "hi"))[::2], "unknown model", "smollm2-135m-instruct"
    )
    assert_one_line_error(*run_cli(capsys, *gen(tmp_path, "--prompt", "hi"))[::2], "not a model")


def test_draft_with_another_vocabulary(capsys, model_folder, other_vocab_folder):
    code, _, err = run_cli(capsys, *gen(model_folder, "--draft", str(other_vocab_folder), "--prompt", "w1"))
    assert_one_line_error(code, err, "vocabulary")


def test_hub_id_when_offline(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert_one_line_error(*run_cli(capsys, *gen("Qwen/Qwen2.5-1.5B-Instruct", "--prompt", "hi"))[::2], "HF_HUB_OFFLINE")


def test_hub_id_without_a_reachable_hub_fails_fast(capsys, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.setenv("HF_HOME", "/nonexistent-specviz-hf-home")
    assert_one_line_error(*run_cli(capsys, *gen("someone/some-model", "--prompt", "hi"))[::2], "not reachable")


def test_subprocess_exit_code_and_single_line(new_process):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = new_process(
        "-m",
        "specviz",
        "generate",
        "--target",
        "nope",
        "--prompt",
        "hi",
        "--gamma",
        "40",
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == ["error: gamma (draft length) must be an integer in 1..32, got 40"]


def test_medusa_from_the_command_line_equals_plain(capsys, model_folder, tmp_path, target):
    import torch

    from specviz.drafters.medusa.heads import MedusaHeads, save_medusa

    heads = MedusaHeads(target.model.config.hidden_size, target.vocab_size, 4, 1, target.model.get_output_embeddings())
    with torch.no_grad():
        for p in heads.parameters():
            p.zero_()  # each head repeats the target's own guess
    folder = save_medusa(heads, tmp_path / "heads", str(model_folder))
    base = [
        "generate",
        "--target",
        str(model_folder),
        "--prompt",
        "w5 w5 w5 w5",
        "--no-chat",
        "--max-new-tokens",
        "30",
        "--dtype",
        "float32",
        "--json",
    ]
    code, out, _ = run_cli(capsys, *base)
    plain = json.loads(out)
    code, out, _ = run_cli(capsys, *base, "--drafter", "medusa", "--medusa", str(folder), "--gamma", "3")
    medusa = json.loads(out)
    assert code == 0 and medusa["token_ids"] == plain["token_ids"]
    assert any(step["candidates"] for step in medusa["steps"])
    code, _, err = run_cli(capsys, *base, "--drafter", "medusa", "--medusa", str(tmp_path))
    assert code == 2 and err.startswith("error: ") and "not a Medusa checkpoint" in err
    code, out, _ = run_cli(
        capsys,
        *base,
        "--drafter",
        "medusa",
        "--medusa",
        str(folder),
        "--gamma",
        "3",
        "--medusa-tree",
        "[[0], [0, 0], [0, 0, 0], [1]]",
        "--acceptance",
        "greedy",
    )
    assert code == 0 and json.loads(out)["token_ids"] == plain["token_ids"]
    for extra, words in (
        (["--medusa-tree", "[[0], []]"], "Medusa tree must be"),
        (["--acceptance", "greedy", "--temperature", "0.7"], "greedy acceptance needs temperature 0"),
        (["--medusa-tree", "[[0, 0, 0, 0, 0]]"], "5 deep but these heads are only 4"),
    ):
        code, _, err = run_cli(capsys, *base, "--drafter", "medusa", "--medusa", str(folder), *extra)
        assert code == 2 and err.startswith("error: ") and words in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(capsys, *base, "--drafter", "medusa")
    assert code == 2 and "no Medusa heads for" in err


def test_eagle_from_the_command_line_equals_plain_and_train_eagle_makes_a_head(capsys, model_folder, tmp_path):
    base = ["generate", "--target", str(model_folder), "--prompt", "w5 w6 w5 w6", "--no-chat"]
    base += "--max-new-tokens 25 --dtype float32 --json".split()
    plain = json.loads(run_cli(capsys, *base)[1])
    texts = tmp_path / "texts.json"
    texts.write_text(json.dumps(["w1 w2 w3", "w4 w5", "w6 w7 w8 w9", "w10 w11", "w12", "w13 w14 w15"]))
    where = ["--base", str(model_folder), "--out", str(tmp_path / "eagle"), "--prompts", str(texts)]
    how = "--samples 2 --tokens-per-prompt 40 --steps 5 --window 16 --dtype float32".split()
    code, out, err = run_cli(capsys, "train-eagle", *where, *how)
    assert code == 0 and "held-out chain acceptance by depth 1:" in out, err
    config = json.loads((tmp_path / "eagle" / "config.json").read_text())
    assert (
        config["specviz_training"]["steps"] == 5
        and len(config["specviz_training"]["held_out_acceptance_by_depth"]) == 5
    )
    for tree in ("dynamic", "chain"):
        eagle = ["--drafter", "eagle", "--eagle", str(tmp_path / "eagle"), "--gamma", "4", "--eagle-tree", tree]
        code, out, err = run_cli(capsys, *base, *eagle, "--eagle-nodes", "6")
        assert code == 0 and json.loads(out)["token_ids"] == plain["token_ids"], err
    hybrid = ["--drafter", "hybrid", "--hybrid-model", "eagle", "--gamma", "6"]  # the lookup or the head, no --draft
    code, out, err = run_cli(capsys, *base, *hybrid, "--eagle", str(tmp_path / "eagle"))
    assert code == 0 and json.loads(out)["token_ids"] == plain["token_ids"], err
    both = ["--eagle", str(tmp_path / "eagle"), "--draft", str(model_folder)]
    for extra, words in (
        ([], "no EAGLE heads for"),
        (both, "--draft is not used by --drafter hybrid with the options given"),
    ):
        code, _, err = run_cli(capsys, *base, *hybrid, *extra)
        assert code == 2 and err.startswith("error: ") and words in err and len(err.strip().splitlines()) == 1, err
    for extra, words in (
        (["--eagle", str(tmp_path)], "not an EAGLE checkpoint"),
        ([], "no EAGLE heads for"),
        (["--eagle", str(tmp_path / "eagle"), "--eagle-nodes", "1"], "EAGLE tree nodes must be"),
        (["--eagle", str(tmp_path / "eagle"), "--eagle-tree", "bushy"], "invalid choice: 'bushy'"),
    ):
        code, _, err = run_cli(capsys, *base, "--drafter", "eagle", *extra)
        assert code == 2 and err.startswith("error: ") and words in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(capsys, "train-eagle", "--out", str(tmp_path / "x"), "--unroll", "-1")
    assert code == 2 and err.strip() == "error: --unroll must be at least 0, got -1"
    code, _, err = run_cli(capsys, "train-eagle", "--out", str(tmp_path / "x"), "--until-step", "3")
    assert (
        code == 2
        and err.strip() == "error: --until-step needs --checkpoint, where the run keeps its state to go on from"
    )


def test_train_eagle_stops_at_a_step_and_goes_on_from_its_checkpoint(capsys, model_folder, tmp_path):
    texts = tmp_path / "texts.json"
    texts.write_text(json.dumps({"a": ["w1 w2 w3", "w4 w5", "w6 w7 w8 w9"], "b": ["w10 w11", "w12", "w13 w14 w15"]}))
    train = [
        "train-eagle",
        "--base",
        str(model_folder),
        "--out",
        str(tmp_path / "eagle"),
        "--prompts",
        str(texts),
        "--samples",
        "2",
        "--tokens-per-prompt",
        "40",
        "--steps",
        "6",
        "--window",
        "16",
        "--dtype",
        "float32",
        "--features",
        str(tmp_path / "features.pt"),
        "--checkpoint",
        str(tmp_path / "state.pt"),
        "--save-every",
        "2",
    ]
    code, out, err = run_cli(capsys, *train, "--until-step", "3")
    assert code == 0 and " in 3 steps" in out and (tmp_path / "state.pt").is_file(), err
    code, out, err = run_cli(capsys, *train)
    assert code == 0 and " in 6 steps" in out and "went on from" in err and "at step 3" in err, err
    assert json.loads((tmp_path / "eagle" / "config.json").read_text())["specviz_training"]["steps"] == 6


def test_an_int8_draft_through_the_cli_equals_plain_and_an_int8_target_runs(capsys, model_folder):
    base = gen(model_folder, "--prompt", "w7 w8 w9", "--no-chat", "--max-new-tokens", "20", "--json")
    code, out, _ = run_cli(capsys, *base)
    plain = json.loads(out)["token_ids"]
    code, out, err = run_cli(capsys, *base, "--draft", str(model_folder), "--draft-dtype", "int8", "--gamma", "4")
    assert code == 0, err
    assert json.loads(out)["token_ids"] == plain  # the target (float32) alone decides the output
    code, out, err = run_cli(
        capsys,
        *gen(model_folder, "--prompt", "w7 w8 w9", "--no-chat", "--max-new-tokens", "8", "--json"),
        "--dtype",
        "int8",
    )
    assert code == 0 and len(json.loads(out)["token_ids"]) == 8, err
    assert_one_line_error(*run_cli(capsys, *base, "--draft-dtype", "int4")[::2], "--draft-dtype", "int4")


def test_generate_says_whether_exact_mode_held(capsys, model_folder):
    """bfloat16 on a CPU: exact mode unless --no-exact; float32: off, with the reason; in JSON and in the summary."""
    base = ["generate", "--target", str(model_folder), "--device", "cpu", "--prompt", "w1 w2 w3", "--max-new-tokens"]
    for extra, on, words in (
        (["--dtype", "bfloat16"], True, "exact mode"),
        (["--dtype", "bfloat16", "--no-exact"], False, "exact mode off"),
        (["--dtype", "float32"], False, "exact mode off: it covers bfloat16 and int8 targets, and this one is float32"),
    ):
        code, out, err = run_cli(capsys, *base, "6", "--drafter", "ngram", "--json", *extra)
        assert code == 0, err
        found = json.loads(out)
        assert found["exact"] is on and found["exact_mode"] == words
        code, out, err = run_cli(capsys, *base, "6", *extra)
        assert code == 0 and err.strip().splitlines()[-1].endswith(f"; {words}"), err
