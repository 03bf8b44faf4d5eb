"""bench-drafters end to end on the tiny pair, and the per-position acceptance it reports."""

import json

from specviz.cli import main
from specviz.events import StepEvent, depth_acceptance


def step(proposed: int, accepted: int) -> StepEvent:
    kind = "bonus" if accepted == proposed and proposed else "correction" if proposed else "plain"
    return StepEvent(0, tuple(range(proposed)), accepted, 1, kind, (0.5,) * proposed, None, 0.0, 0.0, 0.0)


def test_acceptance_by_position_counts_only_steps_that_reached_it():
    events = [step(3, 3), step(3, 1), step(3, 0), step(2, 2), step(0, 0)]
    # position 1: 4 tried, 3 accepted; position 2: tried by the 3 that accepted position 1, 2 kept it;
    # position 3: tried by the one 3-long step that got that far
    assert depth_acceptance(events, 4) == [0.75, 2 / 3, 1.0, None]


def test_bench_drafters_runs_every_drafter_on_the_same_prompts(capsys, pair_folders, pair_heads, tmp_path):
    target, draft = pair_folders
    code = main(["bench-drafters", "--target", str(target), "--draft", str(draft), "--medusa", str(pair_heads),
                 "--kinds", "code,prose", "--prompts-per-kind", "1", "--max-new-tokens", "12", "--gamma", "3",
                 "--dtype", "float32", "--out", str(tmp_path)])
    out, _ = capsys.readouterr()
    assert code == 0
    rows = json.loads((tmp_path / "drafters.json").read_text())["rows"]
    greedy = [r for r in rows if r["temperature"] == 0]
    assert {r["method"] for r in greedy} == {"plain", "draft", "ngram", "history", "medusa"}
    assert all(r["same_as_plain"] for r in greedy)  # fp32: every drafter gives the plain output
    sampled = {r["method"] for r in rows if r["temperature"] == 0.7}
    assert "medusa typical (lossy)" in sampled and len(rows) == 2 * 5 + 2 * 6
    assert all(len(r["by_depth"]) == 3 for r in rows)
    assert "| code | 0 | medusa |" in out and (tmp_path / "drafters.md").read_text().strip() == out.strip()


def test_bench_drafters_refuses_bad_input_in_one_line(capsys, pair_folders):
    code = main(["bench-drafters", "--target", str(pair_folders[0]), "--temperatures", "0,hot"])
    _, err = capsys.readouterr()
    assert code == 2 and err.strip() == "error: --temperatures must look like 0,0.7, got '0,hot'"
    code = main(["bench-drafters", "--target", str(pair_folders[0]), "--draft", "none"])
    _, err = capsys.readouterr()
    assert code == 2 and "no Medusa heads ship for" in err
