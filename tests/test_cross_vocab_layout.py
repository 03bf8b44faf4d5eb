"""A draft with another tokenizer, on every vocabulary layout: a tokenizer that knows ids past its model's rows (added
tokens, trimmed embeddings) on either side, and models with padded rows no tokenizer id names. Greedy output stays the
target's, sampling keeps the target's law, and a prompt the target itself cannot read is one line."""

import pytest
import torch
from test_cross_tokenizer import law_p, relabelled, small_cross  # noqa: F401 (a fixture)
from tiny import loaded, tiny_llama, word_tokenizer

from specviz.drafters.cross_tokenizer import CrossTokenizerDrafter
from specviz.engine import generate, new_generator
from specviz.errors import InvalidRequest
from specviz.events import generated_ids
from specviz.settings import Settings


def with_rows(model: torch.nn.Module, rows: int, loud: int | None = None, gain: float = 3.0) -> torch.nn.Module:
    """`model` with its embedding and output rows cut or padded to `rows`; padded output rows copy row `loud` times
    `gain` (each a little more: no exact ties), so they carry real probability."""
    size = model.get_input_embeddings().num_embeddings
    model.resize_token_embeddings(rows, mean_resizing=False)
    if rows > size and loud is not None:
        with torch.no_grad():
            for k in range(size, rows):
                model.lm_head.weight[k] = model.lm_head.weight[loud] * (gain + 0.1 * (k - size))
    return model


def greedy_is_plain(target, draft, prompt, max_new_tokens=24) -> list:
    """Greedy runs with the cross-tokenizer draft for several γ equal plain decoding; the proposals, for inspection."""
    plain = generated_ids(generate(target, prompt, Settings(max_new_tokens=max_new_tokens)))
    proposed = []
    for gamma in (1, 3, 5):
        settings = Settings(max_new_tokens=max_new_tokens, gamma=gamma)
        drafter = CrossTokenizerDrafter(draft, target, settings, new_generator(target.device, 0))
        events = list(generate(target, prompt, settings, drafter))
        assert generated_ids(events) == plain, f"gamma={gamma}"
        proposed += [e.proposed for e in events if e.proposed]
    return proposed


@pytest.fixture(scope="module")
def unreadable_draft_words(small_cross):
    """The draft's tokenizer names 9 ids; its model has 7 rows: "a" (in the prompt) and "z" have no embedding."""
    target, _, prompt = small_cross
    draft = relabelled(target, ["f", "e", "d", "c", "b", "a", "z"], seed=12, noise=0.5)
    return target, loaded(with_rows(draft.model, 7), draft.tokenizer, "tiny-cut-draft"), prompt


def test_draft_ids_past_its_rows_keep_greedy_output(unreadable_draft_words):
    target, draft, prompt = unreadable_draft_words
    assert greedy_is_plain(target, draft, prompt)


@pytest.fixture(scope="module")
def target_added_word():
    """The target's tokenizer has an added word "z" (id 8) its model has no row for; the draft knows "z" as an
    ordinary word and writes it often."""
    words = ["a", "b", "c", "d", "e", "f"]
    target_model = tiny_llama(len(words) + 2, seed=11, sharpness=0.1)
    plain_target = loaded(target_model, word_tokenizer(words))
    draft = relabelled(plain_target, ["f", "e", "d", "c", "b", "a", "z"], seed=12, noise=0.5)
    z = draft.tokenizer.get_vocab()["z"]
    with torch.no_grad():  # "z" wins wherever "b" would have, so the draft writes it
        draft.model.lm_head.weight[z] = draft.model.lm_head.weight[draft.tokenizer.get_vocab()["b"]] * 2
    tok = word_tokenizer(words)
    tok.add_tokens(["z"])
    assert tok.get_vocab()["z"] == 8 == target_model.get_input_embeddings().num_embeddings
    target = loaded(target_model, tok, "tiny-added-word")
    return target, draft, tok.encode("a b c")


def test_a_draft_writing_a_word_the_target_cannot_embed_keeps_greedy_output(target_added_word):
    target, draft, prompt = target_added_word
    proposed = greedy_is_plain(target, draft, prompt)
    rows = target.model.get_input_embeddings().num_embeddings
    assert proposed and all(t < rows for chain in proposed for t in chain)


def test_a_draft_writing_a_word_the_target_cannot_embed_keeps_the_targets_law(target_added_word, draws):
    assert law_p(target_added_word, draws) > 1e-3


def test_a_prompt_the_target_cannot_embed_is_one_line(target_added_word):
    target, _, _ = target_added_word
    prompt = target.tokenizer.encode("a z b")
    with pytest.raises(InvalidRequest, match=r"token 8 \('z'\).*8 embedding rows") as refused:
        list(generate(target, prompt, Settings(max_new_tokens=4)))
    assert "\n" not in str(refused.value)


@pytest.fixture(scope="module")
def padded_both(small_cross):
    """Both models padded past their tokenizers (as Qwen 7B's 152,064 rows against 151,665 ids): the target's padded
    rows carry real probability, so it samples ids no tokenizer can spell; the draft's are loud."""
    target, draft, prompt = small_cross
    model = tiny_llama(8, seed=11, sharpness=0.1)
    with torch.no_grad():
        likeliest = int(model(torch.tensor([prompt])).logits[0, -1].argmax())
    target = loaded(with_rows(model, 11, loud=likeliest, gain=1.0), target.tokenizer, "tiny-padded")
    draft = relabelled(loaded(target.model, target.tokenizer), ["f", "e", "d", "c", "b", "a", "z"], seed=12, noise=0.5)
    draft = loaded(with_rows(draft.model, 12, loud=4), draft.tokenizer, "tiny-padded-draft")
    return target, draft, prompt


def test_padded_rows_on_both_sides_keep_greedy_output(padded_both):
    target, draft, prompt = padded_both
    assert greedy_is_plain(target, draft, prompt)


def test_padded_rows_on_both_sides_keep_the_targets_law(padded_both, draws):
    assert law_p(padded_both, draws) > 1e-3
