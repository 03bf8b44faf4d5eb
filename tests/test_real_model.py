"""A real offline model (SmolLM2-135M, fp32): drafting for itself accepts everything and changes nothing."""

import pytest

from specviz.drafters.registry import build_drafter
from specviz.engine import generate, new_generator
from specviz.events import generated_ids, summarize
from specviz.models import encode_prompt
from specviz.settings import Settings


def test_self_drafting_is_identical_and_fully_accepted(smollm):
    prompt = encode_prompt(smollm, "Write a Python function that checks whether a number is prime.")
    assert smollm.tokenizer.decode(prompt).startswith("<|im_start|>")  # the chat template was applied
    plain = list(generate(smollm, prompt, Settings(max_new_tokens=40)))
    for gamma in (1, 4):
        s = Settings(max_new_tokens=40, gamma=gamma)
        gen = new_generator(smollm.device, 0)
        events = list(generate(smollm, prompt, s, build_drafter("draft", s, gen, smollm, smollm), gen))
        m = summarize(events)
        assert generated_ids(events) == generated_ids(plain)
        assert m.acceptance_rate == 1.0 and m.new_tokens == len(generated_ids(plain))
    text = smollm.tokenizer.decode(generated_ids(plain), skip_special_tokens=True)
    assert "def " in text  # a real model writes real code


PASSAGE = (
    "Read the passage and list each person with their role.\n\nPassage: The bridge opened in 1932. Its chief "
    "engineer, Maria Lind, designed it with her deputy Tomas Berg, while the mayor, Ana Ruiz, cut the ribbon."
)


@pytest.mark.parametrize("kind, options", [("ngram", {"ngram_min": 3}), ("history", {"candidates": 4})])
def test_lookup_drafters_are_identical_on_an_input_grounded_prompt(smollm, kind, options):
    prompt = encode_prompt(smollm, PASSAGE)
    plain = generated_ids(generate(smollm, prompt, Settings(max_new_tokens=48)))
    s = Settings(max_new_tokens=48, gamma=4)
    events = list(generate(smollm, prompt, s, build_drafter(kind, s, None, smollm, None, options)))
    assert generated_ids(events) == plain
    assert summarize(events).target_forwards < len(plain)  # the lookups paid off at least once


def test_the_shipped_medusa_heads_work_out_of_the_box(smollm):
    from specviz.drafters.medusa.heads import load_medusa, shipped_heads
    from specviz.runs import generate_named

    heads = load_medusa(shipped_heads("smollm2-135m-instruct"), smollm)
    assert heads.compact and heads.shortlist is not None and len(heads.heads) == 4
    prompt = encode_prompt(smollm, "Write a Python function that checks whether a number is prime.")
    plain = generated_ids(generate(smollm, prompt, Settings(max_new_tokens=48)))
    s = Settings(max_new_tokens=48, gamma=4, acceptance="greedy")
    events = list(generate_named(smollm, prompt, s, "medusa", None, {"medusa": heads, "medusa_tree": "sparse"}))
    assert generated_ids(events) == plain
    assert summarize(events).mean_tokens_per_step > 1.2  # the heads guess real tokens, not noise
