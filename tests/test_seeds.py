"""Seeds are integers in 0 … 2**32 - 1 everywhere: read exactly (never through a float), refused past the range with
a line quoting the seed given, distinct seeds give distinct runs, and the largest one replays."""

import json

import pytest
import torch

from specviz.app.request import settings_of
from specviz.cli import main
from specviz.engine import generate
from specviz.errors import InvalidRequest
from specviz.settings import MAX_SEED, Settings


def sampled(target, seed: int) -> list[int]:
    settings = Settings(max_new_tokens=40, temperature=2.0, seed=seed)  # hot enough that runs tell seeds apart
    return [t for e in generate(target, [3, 4, 5], settings) for t in e.tokens]


def test_the_generator_keeps_32_bits_so_the_range_stops_there():
    low, high = (torch.rand(4, generator=torch.Generator().manual_seed(s)) for s in (5, 2**32 + 5))
    assert torch.equal(low, high)  # why the range is 0 … 2**32 - 1: beyond it, two seeds would be one run
    assert MAX_SEED == 2**32 - 1
    with pytest.raises(InvalidRequest, match=r"seed must be an integer in 0\.\.4294967295 .*got 4294967301$"):
        Settings(seed=2**32 + 5)
    for bad in (-1, True, 1.5, "7"):
        with pytest.raises(InvalidRequest, match="seed must be an integer"):
            Settings(seed=bad)


def test_distinct_seeds_give_distinct_runs_and_the_largest_replays(target):
    runs = {seed: sampled(target, seed) for seed in (0, 1, 2**31, MAX_SEED - 1, MAX_SEED)}
    assert len({tuple(r) for r in runs.values()}) == len(runs)
    assert sampled(target, MAX_SEED) == runs[MAX_SEED]  # the largest seed reproduces its run


@pytest.mark.parametrize("given, expected", [(2**53 + 1, 2**53 + 1), ("4294967295", 4294967295), (7.0, 7)])
def test_the_app_reads_a_seed_as_the_integer_given(given, expected):
    if expected > MAX_SEED:
        with pytest.raises(InvalidRequest, match=f"got {expected}$"):  # quotes what was sent, not a rounding of it
            settings_of({"seed": given})
    else:
        assert settings_of({"seed": given}).seed == expected


def test_the_cli_refuses_a_seed_past_the_range_in_one_line(capsys, model_folder):
    code = main(["generate", "--target", str(model_folder), "--prompt", "w1 w2", "--seed", str(2**32), "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and err.strip().splitlines() == [
        f"error: seed must be an integer in 0..4294967295 (2**32 - 1: on a CPU torch keeps only the low 32 bits "
        f"of a seed), got {2**32}"
    ]
    code = main(
        [
            "generate",
            "--target",
            str(model_folder),
            "--prompt",
            "w1 w2",
            "--seed",
            str(MAX_SEED),
            "--temperature",
            "1",
            "--max-new-tokens",
            "4",
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0 and len(json.loads(out)["token_ids"]) == 4
