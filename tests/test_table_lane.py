"""A lane that follows a table of γ by batch size (vLLM's num_speculative_tokens_per_batch_size), as measured by a
sweep or as a serving engineer wrote it: how a table is read and refused, the lane asked for by name, every step of a
traffic run taking the table's γ for its batch while every greedy request writes what its prompt writes alone, and in
the app the table the visitor's last sweep measured."""

import json

import pytest
from test_cli import assert_one_line_error, run_cli

from specviz.app.backend import Backend
from specviz.app.shelf import ModelShelf, PairPreset
from specviz.engine.gamma_policy import gamma_at
from specviz.errors import InvalidRequest
from specviz.events import PLAIN
from specviz.serving.batch_table import ANY_DRAFTER, VllmAdvice, read_table, tables_in
from specviz.settings import Settings
from specviz.workload.entrants import EntryRules, lane_entrants

PROMPTS = ["w1 w2 w3", "w4 w5 w1 w2", "w3"]
TABLE = ((1, 1, 3), (2, 8, 1))


def test_a_batch_takes_its_ranges_gamma_the_next_ranges_in_a_gap_and_the_last_past_the_end():
    table = ((2, 3, 4), (5, 8, 2), (9, 16, 0))
    assert [gamma_at(table, b) for b in (1, 2, 3, 4, 5, 8, 9, 16, 17, 64)] == [4, 4, 4, 2, 2, 2, 0, 0, 0, 0]


def test_a_table_is_read_from_a_record_or_a_vllm_config_and_a_bad_one_is_refused_naming_where():
    key = "num_speculative_tokens_per_batch_size"
    config = {"method": "draft_model", "num_speculative_tokens": 3, key: [[1, 1, 3], [2, 8, 1]]}
    assert tables_in(config) == {ANY_DRAFTER: TABLE}
    record = {"vllm": [VllmAdvice("draft", config, "measured").__dict__, VllmAdvice("medusa", None, "none").__dict__]}
    assert tables_in(json.loads(json.dumps(record))) == {"draft": TABLE}
    for bad, said in [
        ([], "is empty"),
        ([[1, 2]], "[0] is [1, 2]"),
        ([[2, 1, 3]], "[0][1]"),
        ([[1, 4, 3], [3, 8, 1]], "inside the range before it"),
        ([[1, 4, 99]], "[0][2]"),
        ([[1, 4, "3"]], "[0][2]"),
    ]:
        with pytest.raises(ValueError, match=said.replace("[", r"\[").replace("]", r"\]")) as refused:
            read_table(bad, key)
        assert "\n" not in str(refused.value)
    with pytest.raises(ValueError, match="neither"):
        tables_in({"something": 1})
    with pytest.raises(ValueError, match="no drafter vLLM also has"):
        tables_in({"vllm": [VllmAdvice("medusa", None, "none").__dict__]})


def rules(tables):
    return EntryRules(lambda k: k.parse({}), "tiny", True, tables, "give --table FILE")


def test_a_table_lane_is_asked_by_name_and_refused_in_one_line_where_no_table_can_be_had():
    (lane,) = lane_entrants("draft@table", Settings(), False, rules({"draft": TABLE}))
    assert lane.name == "draft@table" and lane.table == TABLE
    assert lane.settings.gamma == 3 and not lane.settings.adaptive  # the widest γ the table asks: what a verify holds
    assert "γ by batch size 1: 3, 2–8: 1" in lane.contender.words
    (anyone,) = lane_entrants("ngram@table", Settings(), False, rules({ANY_DRAFTER: TABLE}))
    assert anyone.table == TABLE
    with pytest.raises(InvalidRequest, match="only under load"):
        lane_entrants("draft@table", Settings(), False, rules(None))  # a race: one request, no batch sizes
    with pytest.raises(InvalidRequest, match="no table of γ by batch size for draft here; give --table FILE"):
        lane_entrants("draft@table", Settings(), False, rules({"ngram": TABLE}))


def test_traffic_with_a_table_lane_takes_the_tables_gamma_at_every_batch_size(capsys, pair_folders, tmp_path):
    """A vLLM config's table (γ 3 alone, 1 from two rows): every step of the lane drafts what the table gives its batch
    (less only near a request's budget), both γ are met, and every greedy request equals its prompt alone."""
    target, draft = pair_folders
    prompts, table = tmp_path / "prompts.txt", tmp_path / "config.json"
    prompts.write_text("\n".join(PROMPTS))
    table.write_text(json.dumps({"num_speculative_tokens_per_batch_size": [list(r) for r in TABLE]}))
    code, out, err = run_cli(
        capsys,
        *("traffic", "--target", str(target), "--draft", str(draft), "--dtype", "float32", "--device", "cpu"),
        *("--drafters", "draft@table", "--table", str(table), "--rates", "2,200", "--requests", "6"),
        *("--max-rows", "3", "--prompts", str(prompts), "--max-new-tokens", "12", "--no-chat", "--json"),
    )
    assert code == 0, err
    seen = set()
    for at in json.loads(out)["rates"]:
        assert set(at["lanes"]) == {PLAIN, "draft@table"}
        lane = at["lanes"]["draft@table"]
        assert lane["identical"] is True
        for step in lane["runs"][0]["steps"]:
            assert step["gamma"] <= gamma_at(TABLE, step["rows"])
            seen.add((min(step["rows"], 2), step["gamma"]))
    assert {(1, 3), (2, 1)} <= seen


def test_a_recorded_sweeps_table_runs_as_a_lane_of_the_next_sweep(capsys, pair_folders, tmp_path):
    """The path a serving engineer takes: a sweep recorded with --trace, then `--drafters draft@table --table` that
    record: the lane drafts at each level what the first sweep wrote for vLLM there (γ 0 where plain served more, as
    it does on these random weights), and every row is identical."""
    target, draft = pair_folders
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS))
    common = (
        "--target",
        str(target),
        "--draft",
        str(draft),
        "--dtype",
        "float32",
        "--device",
        "cpu",
        "--levels",
        "1,3",
    )
    common += ("--prompts", str(prompts), "--max-new-tokens", "8", "--no-chat")
    code, _, err = run_cli(capsys, "concurrency", *common, "--drafters", "draft@2,draft@4", "--trace",
                           str(tmp_path / "sweep.json"))  # fmt: skip
    assert code == 0, err
    table = tables_in(json.loads((tmp_path / "sweep.json").read_text()))["draft"]
    code, out, err = run_cli(capsys, "concurrency", *common, "--drafters", "draft@table", "--table",
                             str(tmp_path / "sweep.json"), "--json")  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert (
        data["lanes"]["draft@table"]["fixed_gamma"] is None
        and "γ by batch size" in data["lanes"]["draft@table"]["words"]
    )
    for at in data["levels"]:
        lane = at["lanes"]["draft@table"]
        assert all(row["identical"] for row in lane["rows"])
        assert max(lane["gammas"]) <= gamma_at(table, at["level"]) and lane["gammas"][0] == gamma_at(table, at["level"])


def test_a_table_file_that_holds_none_is_refused_in_one_line_before_any_model_loads(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"num_speculative_tokens_per_batch_size": [[1, 4, 2], [3, 8, 1]]}))
    for command in ("traffic", "concurrency"):
        code, _, err = run_cli(capsys, command, "--target", "/no/such/model", "--drafters", "draft@table", "--table",
                               str(bad))  # fmt: skip
        assert_one_line_error(code, err, "--table", "bad.json", "inside the range before it")
        code, _, err = run_cli(capsys, command, "--target", "/no/such/model", "--drafters", "draft@table")
        assert_one_line_error(code, err, "draft@table", "--table FILE")


def test_in_the_app_a_table_lane_follows_the_visitors_last_sweep_of_the_pair(pair_folders):
    """Before a sweep the lane is refused in one line saying to run one; after it, traffic runs the lane on the
    table that sweep measured, and a sweep may race the table against the lanes that measured it."""
    target, draft = pair_folders
    backend = Backend(ModelShelf([PairPreset("tiny", str(target), str(draft))], "cpu"))
    values = {"pair": "tiny", "dtype": "float32", "prompt": "unused", "max_new_tokens": 8}
    with pytest.raises(InvalidRequest, match="run a Concurrency sweep first"):
        next(iter(backend.traffic(values, PROMPTS, "draft@table", "50", 3, session="visitor")))
    list(backend.concurrency(values, PROMPTS, "draft@2,draft@a3", "1,2", session="visitor"))
    table = backend.level_tables.of("visitor", "tiny")["draft"]  # γ 0 where plain served more
    final = list(backend.traffic(values, PROMPTS, "draft@table", "50", 3, session="visitor"))[-1]
    assert final.lanes == (PLAIN, "draft@table") and final.identical("draft@table", 50.0) is True
    for run in final.runs["draft@table", 50.0]:
        assert all(step.gamma <= gamma_at(table, step.rows) for step in run.steps)
    again = list(backend.concurrency(values, PROMPTS, "draft@table,draft@a3", "1,2", session="visitor"))[-1]
    assert again.fixed["draft@table"] is None and again.identical["draft@table", 2] == [True, True]
    with pytest.raises(InvalidRequest, match="run a Concurrency sweep first"):
        next(iter(backend.traffic(values, PROMPTS, "draft@table", "50", 3, session="another visitor")))
