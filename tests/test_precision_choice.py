"""The target's precision follows the measured costs (models/precision_choice.py, models/kernel_costs.py): on a CPU
where a bfloat16 verify costs several one-token forwards and int8's is flat, int8; on one with AMX, where bfloat16's
verify is nearly free, bfloat16 in exact mode. The tables are injected, shaped as those CPUs measured them: the code
is tested, never this CPU's kernels. The measurement itself runs on a tiny shape, and is kept."""

import json

import pytest
import torch

from specviz.models import kernel_costs
from specviz.models.kernel_costs import CostTable, Shape, costs_for
from specviz.models.precision_choice import QUANTISED_MARGIN, choose, expected_tokens, plan

# Seconds per forward of the offline pair's target (Qwen2.5-Coder 1.5B), by width, on the two kinds of CPU: the
# shapes of an AMD EPYC (AVX2, no bfloat16 instructions) and of a Xeon with AMX.
AVX2 = {
    "bfloat16": {1: 0.41, 2: 0.80, 3: 1.05, 5: 1.45, 9: 2.2, 13: 3.0},
    "float32": {1: 0.45, 2: 0.95, 3: 1.2, 5: 1.39, 9: 1.9, 13: 2.4},
    "int8": {1: 0.14, 2: 0.15, 3: 0.16, 5: 0.17, 9: 0.2, 13: 0.27},
}
AMX = {
    "bfloat16": {1: 0.20, 2: 0.19, 3: 0.19, 5: 0.19, 9: 0.22, 13: 0.27},
    "float32": {1: 0.38, 2: 0.5, 3: 0.62, 5: 0.7, 9: 0.9, 13: 1.1},
    "int8": {1: 0.12, 2: 0.13, 3: 0.13, 5: 0.14, 9: 0.16, 13: 0.2},
}


def test_on_an_avx2_cpu_the_flat_int8_verify_wins_and_is_exact():
    chosen = choose(CostTable("AMD EPYC (avx2)", AVX2), draft_cost=0.04)
    assert chosen.dtype == "int8" and chosen.exact and chosen.gamma >= 3
    assert chosen.plans["int8"].speed >= QUANTISED_MARGIN * chosen.plans["bfloat16"].speed
    # bfloat16's paired one-row product costs two rows here: exact mode would double every plain token
    assert not chosen.plans["bfloat16"].exact
    assert "int8 on AMD EPYC" in chosen.reason and "\n" not in chosen.reason


def test_with_amx_bfloat16_stays_and_runs_exact():
    chosen = choose(CostTable("Xeon (amx_bf16)", AMX), draft_cost=0.04)
    assert chosen.dtype == "bfloat16" and chosen.exact
    assert "would not be 1.5× faster" in chosen.reason


def test_the_choice_follows_the_measurement_both_ways():
    """Swap one number, the int8 verify's, and the choice turns: it reads the table, it does not know the CPU."""
    steep = {**AVX2, "int8": {w: 0.4 * w for w in AVX2["int8"]}}  # int8 as dear as bfloat16 alone, w tokens w times
    assert choose(CostTable("x", steep), draft_cost=0.04).dtype != "int8"
    cheap = {**AMX, "int8": {w: s / 4 for w, s in AMX["int8"].items()}}  # int8 four times cheaper throughout
    assert choose(CostTable("x", cheap), draft_cost=0.01).dtype == "int8"


def test_gamma_is_the_one_that_maximises_the_predicted_speed():
    table = CostTable("x", AVX2)
    best = plan(table, "int8", draft_cost=0.04, alpha=0.8)
    for gamma in range(1, 9):
        speed = expected_tokens(0.8, gamma) / (gamma * 0.04 + table.at("int8", gamma + 1))
        assert speed <= best.speed + 1e-12
    assert expected_tokens(0.8, 4) == pytest.approx((1 - 0.8**5) / 0.2)
    assert expected_tokens(1.0, 4) == 5


def test_widths_between_those_measured_are_interpolated():
    table = CostTable("x", {"int8": {1: 1.0, 5: 2.0, 9: 4.0}})
    assert table.at("int8", 3) == pytest.approx(1.5) and table.at("int8", 7) == pytest.approx(3.0)
    assert table.at("int8", 18) == pytest.approx(8.0)  # past the widest: in proportion


TINY = Shape(hidden=64, intermediate=128, attention_out=64, kv_out=32, layers=2, vocab=100, qkv_bias=True)


def test_costs_are_measured_once_per_device_and_shape_and_kept(tmp_path, monkeypatch):
    calls, lines = [], []
    real = kernel_costs.measure

    def counted(shape, path, widths=kernel_costs.WIDTHS):
        calls.append((shape, path))
        return real(shape, path, widths)

    monkeypatch.setattr(kernel_costs, "measure", counted)
    first = costs_for(TINY, torch.device("cpu"), tmp_path, report=lines.append)
    assert sorted(first.forward) == sorted(kernel_costs.CPU_PATHS) and len(calls) == 3 and len(lines) == 1
    assert all(s > 0 for costs in first.forward.values() for s in costs.values())
    again = costs_for(TINY, torch.device("cpu"), tmp_path, report=lines.append)
    assert again == first and len(calls) == 3 and len(lines) == 1  # read back, not measured
    other = Shape(**{**TINY.__dict__, "layers": 3})
    costs_for(other, torch.device("cpu"), tmp_path)
    assert len(calls) == 6
    assert len(json.loads((tmp_path / kernel_costs.COSTS_FILE).read_text())) == 2


def test_a_read_only_cache_still_gives_the_table(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    table = costs_for(TINY, torch.device("cpu"), blocked)
    assert set(table.forward) == set(kernel_costs.CPU_PATHS)


def test_the_shape_is_read_from_a_config():
    from transformers import Qwen2Config

    config = Qwen2Config(
        hidden_size=1536,
        intermediate_size=8960,
        num_attention_heads=12,
        num_key_value_heads=2,
        num_hidden_layers=28,
        vocab_size=151936,
    )
    shape = Shape.of(config)
    assert (shape.attention_out, shape.kv_out, shape.layers, shape.qkv_bias) == (1536, 256, 28, True)
    assert [o for _, o, _ in shape.linears()] == [1536, 256, 256, 1536, 8960, 8960, 1536]


def test_generate_with_dtype_auto_says_what_it_chose_and_why(capsys, model_folder, tmp_path, monkeypatch):
    """The CLI measures (once, into the cache folder), loads the precision chosen, and reports the choice in JSON;
    the run then holds what the choice promised (an int8 or bfloat16 target runs exact where the choice says so)."""
    from specviz.cli import main

    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    args = ["generate", "--target", str(model_folder), "--device", "cpu", "--prompt", "w1 w2 w3", "--max-new-tokens"]
    code = main([*args, "6", "--drafter", "ngram", "--json", "--dtype", "auto"])
    out, err = capsys.readouterr()
    assert code == 0, err
    found = json.loads(out)
    precision = found["precision"]
    assert precision["dtype"] in kernel_costs.CPU_PATHS and set(precision["paths"]) == set(kernel_costs.CPU_PATHS)
    assert precision["reason"].startswith(precision["dtype"]) and "measuring this device's kernels" in err
    assert found["exact"] is precision["exact"]
    assert (tmp_path / kernel_costs.COSTS_FILE).is_file()
    main([*args, "4", "--json", "--dtype", "auto"])  # a second run reads the costs back
    assert "measuring" not in capsys.readouterr().err
