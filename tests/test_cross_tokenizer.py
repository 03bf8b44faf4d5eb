"""A draft model with another tokenizer: greedy output identical to plain, sampling that keeps the target's
distribution (with a wrong mapping of q that the same test must reject), the draft's own tokens in the events, and
one line for a draft that shares no vocabulary."""

import pytest
import torch
from laws import REFUSED
from tiny import loaded, tiny_llama, word_tokenizer

from specviz.drafters.cross_tokenizer import CrossTokenizerDrafter
from specviz.drafters.registry import build_drafter
from specviz.engine import generate, new_generator
from specviz.errors import VocabularyMismatch
from specviz.events import generated_ids
from specviz.models.vocabulary import check_draft_fits, shared_tokens, token_bytes
from specviz.settings import Settings


def relabelled(target, words, seed=7, noise=0.2):
    """A draft over its own word list (other ids, some words the target lacks): the target's weights moved to the
    draft's ids for the shared words, plus noise, so it agrees with the target often but not always."""
    tok = word_tokenizer(words)
    model = tiny_llama(len(tok), seed=seed, layers=target.model.config.num_hidden_layers)
    state = {
        k: v.clone() for k, v in target.model.state_dict().items() if "embed_tokens" not in k and "lm_head" not in k
    }
    model.load_state_dict(state, strict=False)
    t_vocab, d_vocab = target.tokenizer.get_vocab(), tok.get_vocab()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for word, d in d_vocab.items():
            if word in t_vocab:
                model.model.embed_tokens.weight[d] = target.model.model.embed_tokens.weight[t_vocab[word]]
                model.lm_head.weight[d] = target.model.lm_head.weight[t_vocab[word]]
        for w in model.parameters():
            w.add_(torch.randn(w.shape, generator=gen) * noise * w.std().clamp_min(1e-3))
    return loaded(model, tok, "tiny-cross")


@pytest.fixture(scope="module")
def cross(target):
    words = [f"w{i}" for i in range(59, 9, -1)] + [f"v{i}" for i in range(12)]  # reversed ids, 10 words missing, 12 new
    return relabelled(target, words)


def test_the_shared_vocabulary_is_matched_by_spelling(target, cross):
    draft_ids, target_ids = shared_tokens(target, cross)
    assert len(draft_ids) == 50 + 2  # w10..w59 and the two special tokens
    for d, t in zip(draft_ids, target_ids):
        assert cross.tokenizer.convert_ids_to_tokens(d) == target.tokenizer.convert_ids_to_tokens(t)


def test_byte_level_and_sentencepiece_spellings_meet():
    from types import SimpleNamespace

    def fake(vocab):
        return SimpleNamespace(get_vocab=lambda: vocab, all_special_tokens=[], added_tokens_decoder={})

    gpt2 = token_bytes(fake({"Ġhello": 0, "Ċ": 1, "world": 2, **{f"x{i}": 3 + i for i in range(5)}}))
    spm = token_bytes(fake({"▁hello": 0, "<0x0A>": 1, "world": 2}))
    assert gpt2[:3] == [b" hello", b"\n", b"world"] and spm == [b" hello", b"\n", b"world"]


@pytest.mark.parametrize("prompt", ["w11 w12 w13 w14", "w50 w50 w50 w50 w49", "w20"])
def test_greedy_with_another_tokenizer_equals_plain(target, cross, tokenizer, prompt):
    ids = tokenizer.encode(prompt)
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=40)))
    accepted = 0
    for gamma in (1, 2, 4, 7):
        settings = Settings(max_new_tokens=40, gamma=gamma)
        events = list(generate(target, ids, settings, build_drafter("draft", settings, None, target, cross)))
        assert generated_ids(events) == plain, f"gamma={gamma}"
        accepted += sum(e.accepted for e in events)
        drafted = [e for e in events if e.proposed]
        assert drafted and all(e.draft_tokens for e in drafted)  # the draft's own tokens, for Figure 1
    assert accepted > 0


@pytest.fixture(scope="module")
def small_cross():
    """Vocabulary of 8 for the target, a draft over 7 words in another order (one the target lacks)."""
    tok = word_tokenizer(["a", "b", "c", "d", "e", "f"])
    target_model = tiny_llama(len(tok), seed=11, sharpness=0.1)
    with torch.no_grad():
        target_model.lm_head.weight[0] = target_model.lm_head.weight[2] * 0.5  # EOS a real outcome
    target = loaded(target_model, tok)
    return target, relabelled(target, ["f", "e", "d", "c", "b", "a", "z"], seed=12, noise=0.5), tok.encode("a b c")


SAMPLED = Settings(max_new_tokens=3, gamma=2, temperature=1.0)


def law_p(cross, draws, mutant: bool = False) -> float:
    """The chi-square p-value of a (target, draft, prompt)'s first two speculative tokens against the target's law
    (for a mutant, stopped once it is refused)."""
    target, draft, prompt = cross
    drafter = lambda s, generator: CrossTokenizerDrafter(draft, target, s, generator)  # noqa: E731 (one per run)
    return (draws.mutant_p if mutant else draws.law_p)(target, prompt, SAMPLED, drafter)


def test_a_draft_with_no_vocabulary_in_common_is_refused_in_one_line(target):
    stranger = loaded(tiny_llama(12, seed=3), word_tokenizer([f"x{i}" for i in range(10)]), "tiny-stranger")
    with pytest.raises(VocabularyMismatch, match="shares no vocabulary") as refused:
        check_draft_fits(target, stranger)
    assert "\n" not in str(refused.value)


@pytest.fixture(scope="module")
def duplicate_cross(small_cross):
    """A draft whose vocabulary spells some target tokens twice, as SentencePiece's byte fallback does: "a" and
    "<0x61>", "b" and "<0x62>" (each byte piece with weights of its own, so it carries real probability)."""
    target, _, prompt = small_cross
    draft = relabelled(target, ["f", "e", "d", "<0x61>", "c", "b", "a", "<0x62>", "z"], seed=13, noise=0.5)
    return target, draft, prompt


def test_duplicate_spellings_are_mapped_to_one_target_token(duplicate_cross):
    target, draft, _ = duplicate_cross
    pairs = dict(zip(*shared_tokens(target, draft)))
    vocab, target_vocab = draft.tokenizer.get_vocab(), target.tokenizer.get_vocab()
    assert pairs[vocab["<0x61>"]] == pairs[vocab["a"]] == target_vocab["a"]
    assert pairs[vocab["<0x62>"]] == pairs[vocab["b"]] == target_vocab["b"]


def test_sampling_with_another_tokenizer_and_duplicate_spellings_is_lossless(duplicate_cross, draws):
    """The draft's own tokenizer, two of its spellings for one target token: q is translated, summed, then judged."""
    assert law_p(duplicate_cross, draws) > 1e-3


def test_a_wrong_mapping_of_q_is_caught(duplicate_cross, draws, monkeypatch):
    right = CrossTokenizerDrafter.on_target
    monkeypatch.setattr(CrossTokenizerDrafter, "on_target", lambda self, probs: right(self, probs).roll(1, dims=-1))
    assert law_p(duplicate_cross, draws, mutant=True) < REFUSED


def test_keeping_one_duplicate_is_caught(duplicate_cross, draws, monkeypatch):
    """The mutant: q of a target token is one of its draft spellings' probabilities, not their sum."""

    def keep_one(self, probs):
        out = torch.zeros(1, self.target.vocab_size, device=probs.device)
        return out.index_copy_(1, self.to_target[self.shared], probs[:, self.shared])

    monkeypatch.setattr(CrossTokenizerDrafter, "on_target", keep_one)
    assert law_p(duplicate_cross, draws, mutant=True) < REFUSED


def test_greedy_with_duplicate_spellings_equals_plain(duplicate_cross):
    target, draft, prompt = duplicate_cross
    settings = Settings(max_new_tokens=20, gamma=3)
    plain = generated_ids(generate(target, prompt, settings))
    drafter = CrossTokenizerDrafter(draft, target, settings, new_generator(target.device, 0))
    assert generated_ids(generate(target, prompt, settings, drafter)) == plain
