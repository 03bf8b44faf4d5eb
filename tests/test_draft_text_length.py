"""A draft whose tokenizer splits the text far finer than the target's (single characters against long words, as a
byte-level or character draft does on Chinese or emoji) never outgrows its cache: the cache grows with the text."""

import pytest
from tiny import EOS, loaded, tiny_llama, word_tokenizer
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from specviz.drafters.cross_tokenizer import CrossTokenizerDrafter
from specviz.engine import generate, new_generator
from specviz.events import generated_ids
from specviz.settings import Settings

LONG = ["中文中文中文中文中文中文", "🙂🙂🙂🙂🙂🙂🙂🙂🙂🙂🙂🙂", "你好世界你好世界你好世界"]  # 12 characters a word


def char_tokenizer(chars: list[str]) -> PreTrainedTokenizerFast:
    vocab = {c: i for i, c in enumerate([EOS, "<unk>", *chars])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex("."), "isolated")]
    )
    core.decoder = decoders.WordPiece(prefix="##")
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token=EOS, unk_token="<unk>")


@pytest.fixture(scope="module")
def fine_pair():
    target_tok = word_tokenizer([*LONG, "中"])
    target = loaded(tiny_llama(len(target_tok), seed=21), target_tok, "tiny-words")
    chars = sorted({c for word in LONG for c in word})
    draft_model = tiny_llama(len(chars) + 2, seed=22)
    draft_model.specviz_static = True  # the preallocated cache, as on a GPU: the one that could overflow
    return target, loaded(draft_model, char_tokenizer(chars), "tiny-chars")


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_drafts_cache_grows_with_text_it_splits_finely(fine_pair, temperature):
    target, draft = fine_pair
    prompt = target.tokenizer.encode(" ".join(LONG))
    settings = Settings(max_new_tokens=80, gamma=3, temperature=temperature, seed=3)
    drafter = CrossTokenizerDrafter(draft, target, settings, new_generator(target.device, 3))
    out = generated_ids(generate(target, prompt, settings, drafter, new_generator(target.device, 3)))
    text = target.tokenizer.decode(prompt + out)
    first = len(draft.tokenizer.encode(" ".join(LONG))) + 4 * 80 + 32 + 64  # what the cache was sized for at start
    assert len(out) == 80 and len(draft.tokenizer.encode(text)) > first  # the draft's text outgrew that
    assert drafter.lm.capacity >= len(drafter.cached)
    if temperature == 0:
        assert out == generated_ids(generate(target, prompt, settings))  # and greedy output is still the target's
