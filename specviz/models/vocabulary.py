"""Two tokenizers side by side: whether they are one vocabulary, and which tokens they spell the same way.

A token is compared by the bytes it stands for, so byte-level BPE ("Ġhello") and SentencePiece ("▁hello") spellings
of " hello" meet; special tokens by their text. A draft with another tokenizer can draft for a target when they
share some ordinary tokens (drafters/cross_tokenizer.py); with none in common it cannot.
"""

from ..errors import VocabularyMismatch


def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable stand-ins for bytes (Ġ for a space, Ċ for a newline, ...), back to the bytes."""
    visible = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    codes = list(visible)
    extra = 0
    for b in range(256):
        if b not in visible:
            visible.append(b)
            codes.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(visible, codes)}


BYTE_DECODER = _byte_decoder()  # a constant table


def token_bytes(tokenizer) -> list[bytes | None]:
    """Per id, the bytes the token stands for (special tokens: their text); None for an id with no token."""
    vocab = tokenizer.get_vocab()
    special = set(tokenizer.all_special_tokens) | {
        str(t) for t in getattr(tokenizer, "added_tokens_decoder", {}).values()
    }
    byte_level = any("Ġ" in t for t in list(vocab)[:5000])
    decoder = BYTE_DECODER
    out: list[bytes | None] = [None] * (max(vocab.values()) + 1)
    for token, i in vocab.items():
        if token in special:
            out[i] = token.encode()
        elif byte_level and all(c in decoder for c in token):
            out[i] = bytes(decoder[c] for c in token)
        elif token.startswith("<0x") and token.endswith(">") and len(token) == 6:  # SentencePiece byte fallback
            out[i] = bytes([int(token[3:5], 16)])
        else:
            out[i] = token.replace("▁", " ").encode()
    return out


def same_vocabulary(target, draft) -> bool:
    """A draft token id means the same string to both models; compared once per pair of models (two vocabularies of
    150,000 entries take about half a second to compare), as shared_tokens is."""
    return draft.companion(
        ("same-vocabulary", target.name), lambda: target.tokenizer.get_vocab() == draft.tokenizer.get_vocab()
    )


def spelled_alike(target_tokenizer, draft_tokenizer) -> tuple[list[int], list[int]]:
    """(draft ids, target ids), aligned: the tokens both tokenizers spell the same way."""
    target_of = {b: i for i, b in enumerate(token_bytes(target_tokenizer)) if b}
    pairs = [(i, target_of[b]) for i, b in enumerate(token_bytes(draft_tokenizer)) if b and b in target_of]
    return [d for d, _ in pairs], [t for _, t in pairs]


def shared_tokens(target, draft) -> tuple[list[int], list[int]]:
    """spelled_alike for two loaded models, computed once per pair of models."""
    return draft.companion(("shared-tokens", target.name), lambda: spelled_alike(target.tokenizer, draft.tokenizer))


def check_draft_fits(target, draft) -> None:
    """The same vocabulary, or enough in common to draft across tokenizers; else one line saying so."""
    if not same_vocabulary(target, draft):
        check_common_tokens(shared_tokens(target, draft)[0], draft.tokenizer, target.name, draft.name)


def check_tokenizers_fit(target_tokenizer, draft_tokenizer, target_name: str, draft_name: str) -> None:
    """check_draft_fits from the tokenizers alone, before any weights are read."""
    if target_tokenizer.get_vocab() != draft_tokenizer.get_vocab():
        draft_ids, _ = spelled_alike(target_tokenizer, draft_tokenizer)
        check_common_tokens(draft_ids, draft_tokenizer, target_name, draft_name)


def check_common_tokens(draft_ids: list[int], draft_tokenizer, target_name: str, draft_name: str) -> None:
    special = set(draft_tokenizer.all_special_tokens)
    if not any(draft_tokenizer.convert_ids_to_tokens(i) not in special for i in draft_ids):
        raise VocabularyMismatch(
            f"draft '{draft_name}' shares no vocabulary with target '{target_name}' (no ordinary token is spelled the "
            f"same in both), so its guesses cannot be bridged; pick another draft"
        )
