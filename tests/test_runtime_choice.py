"""Which runtime a pair runs on, from measured costs: the faster plan wins, the reason says why in each runtime's
numbers, and a run checks the prediction it rests on (within 15%, or the choice was a guess)."""

import pytest

from specviz.events import StepEvent
from specviz.runtimes.choice import CHECK_MARGIN, check, check_run, choose_fastest, plan_from

LLAMA_CPP = "llama.cpp"
TRANSFORMERS = "transformers"

# What this project's CPU measured (seconds): llama.cpp's Q4 1.5B, plain fast and a verify dear; transformers' bf16
# 1.5B in exact mode, plain slow and a verify of 5 about one forward.
LLAMA = {1: 0.031, 2: 0.050, 4: 0.085, 8: 0.16, 16: 0.26}
BF16 = {1: 0.19, 2: 0.19, 3: 0.19, 5: 0.20, 9: 0.22, 13: 0.25}


def test_the_faster_runtime_is_chosen_and_the_reason_gives_both_sides():
    plans = {
        LLAMA_CPP: plan_from(LLAMA_CPP, "GGUF Q4_K", LLAMA, draft_s=0.018),
        TRANSFORMERS: plan_from(TRANSFORMERS, "bfloat16", BF16, draft_s=0.03),
    }
    choice = choose_fastest(plans, "a CPU")
    assert choice.runtime == LLAMA_CPP
    llama, bf16 = plans[LLAMA_CPP], plans[TRANSFORMERS]
    assert llama.gamma == 0 and llama.speed == pytest.approx(1 / 0.031)  # the draft cannot pay: plain decoding
    assert bf16.gamma > 0 and bf16.speed > bf16.plain  # where a verify is nearly free, it does
    assert "no γ pays" in choice.reason and "transformers bfloat16" in choice.reason
    assert choice.as_dict()["plans"][LLAMA_CPP]["verify_5_forwards"] == round(llama.verify_5, 2)


def test_a_prediction_within_the_margin_stands_and_one_off_is_called_a_guess():
    plan = plan_from(LLAMA_CPP, "GGUF Q4_K", LLAMA, draft_s=0.0)
    near = check(plan, measured=plan.predict(0.9) * (1 - CHECK_MARGIN / 2), alpha=0.9, draft_s=0.0)
    far = check(plan, measured=plan.predict(0.9) * 2, alpha=0.9, draft_s=0.0)
    assert near.stands and "stands" in near.line()
    assert not far.stands and "a guess" in far.line()


def test_a_run_is_checked_at_its_own_acceptance_and_draft_cost():
    plan = plan_from(LLAMA_CPP, "GGUF Q4_K", LLAMA, draft_s=0.0)
    steps = [  # four drafts of which three held, then a plain step: α 3/4 over the drafts tested
        StepEvent(index=0, proposed=(1, 2, 3, 4), accepted=3, next_token=9, next_kind="correction", p=(0.9,) * 4,
                  q=None, draft_s=0.001, verify_s=0.08, step_s=0.09),
        StepEvent(index=1, proposed=(), accepted=0, next_token=5, next_kind="plain", p=(), q=None, draft_s=0.0,
                  verify_s=0.03, step_s=0.031),
    ]  # fmt: skip
    found = check_run(plan, steps)
    assert found.alpha == pytest.approx(0.75) and found.measured == pytest.approx(5 / 0.121, rel=0.01)
    assert found.at_run_alpha == pytest.approx(plan.predict(0.75, 0.001 / 4))
