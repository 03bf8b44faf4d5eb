"""specviz's decoding against references outside its engine: transformers' own greedy `generate`, and a loop that
feeds the whole text to the model at every token with no cache at all (fp32). Every other "identical" test compares a
drafter with specviz's plain decoding; these show that plain decoding itself is what the model produces."""

import pytest
import torch

from specviz.engine import generate
from specviz.events import generated_ids
from specviz.models import encode_prompt
from specviz.runs import generate_named
from specviz.settings import Settings

PROMPTS = ["w1 w2 w3", "w7 w7 w3 w1 w7 w9 w9 w2", "w30 w31 w32 w33 w34 w35 w36 w37 w38 w39 w40 w41"]


def transformers_greedy(loaded, ids: list[int], new: int) -> list[int]:
    model = loaded.model
    prompt = torch.tensor([ids])
    with torch.inference_mode():
        out = model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=new,
            do_sample=False,
            eos_token_id=sorted(loaded.eos_ids),
            pad_token_id=sorted(loaded.eos_ids)[0],
        )
    return _until_eos(out[0, len(ids) :].tolist(), loaded.eos_ids)


def uncached_argmax(loaded, ids: list[int], new: int) -> list[int]:
    """The model's greedy continuation by its definition: the whole text in, the argmax of the last row out."""
    text = list(ids)
    with torch.inference_mode():
        for _ in range(new):
            logits = loaded.model(torch.tensor([text]), use_cache=False).logits[0, -1]
            text.append(int(logits.argmax()))
            if text[-1] in loaded.eos_ids:
                break
    return text[len(ids) :]


def _until_eos(tokens: list[int], eos) -> list[int]:
    end = next((i + 1 for i, t in enumerate(tokens) if t in eos), len(tokens))
    return tokens[:end]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_plain_decoding_is_the_models_own_greedy_continuation(target, tokenizer, prompt):
    ids = tokenizer.encode(prompt)
    ours = generated_ids(generate(target, ids, Settings(max_new_tokens=48)))
    assert ours == transformers_greedy(target, ids, 48)
    assert ours == uncached_argmax(target, ids, 48)


def test_a_run_that_needs_the_large_cache_is_the_models_own_too(pair_folders, tokenizer):
    """A generation of 512 tokens or more uses the preallocated cache on a CPU too: it must change nothing."""
    from tiny import loaded
    from transformers import AutoModelForCausalLM

    big = loaded(AutoModelForCausalLM.from_pretrained(pair_folders[0]).float().eval(), tokenizer, "tiny-4096")
    ids = tokenizer.encode(" ".join(f"w{i % 50}" for i in range(300)))
    ours = generated_ids(generate(big, ids, Settings(max_new_tokens=240)))
    assert len(ours) > 8 and ours == transformers_greedy(big, ids, 240)


@pytest.mark.parametrize("drafter, options", [("draft", {}), ("ngram", {}), ("suffix", {}), ("history", {})])
def test_every_drafter_reproduces_transformers_greedy_output(target, tokenizer, drafts, drafter, options):
    ids = tokenizer.encode(PROMPTS[1])
    reference = transformers_greedy(target, ids, 40)
    settings = Settings(max_new_tokens=40, gamma=4)
    events = generate_named(target, ids, settings, drafter, drafts["partial"] if drafter == "draft" else None, options)
    assert generated_ids(events) == reference


@pytest.mark.parametrize(
    "prompt",
    [
        "Write a Python function that checks whether a number is prime.",
        "List three rivers in Europe and the sea each flows into.",
    ],
)
def test_a_real_models_plain_decoding_is_its_own_greedy_continuation(smollm, prompt):
    ids = encode_prompt(smollm, prompt)
    ours = generated_ids(generate(smollm, ids, Settings(max_new_tokens=32)))
    assert len(ours) > 8
    assert ours == transformers_greedy(smollm, ids, 32)
    assert ours == uncached_argmax(smollm, ids, 32)
