"""After a rollback the cache must behave exactly like a fresh prefill of the kept tokens."""

import torch
from tiny import same_up_to_rows

from specviz.engine.cached_lm import CachedLM


def test_rollback_then_extend_matches_fresh_prefill(target):
    seq = torch.tensor([5, 9, 13, 2, 40, 41, 7, 7, 30, 22, 11])
    lm = CachedLM(target.model)
    lm.extend(seq[:6], last_only=True)
    lm.extend(torch.tensor([50, 51, 52, 53]))  # a rejected draft
    lm.truncate(6)
    assert lm.length == 6 and lm.cache.get_seq_length() == 6
    after_rollback = lm.extend(seq[6:])

    fresh = CachedLM(target.model)
    expected = fresh.extend(seq)[6:]
    assert same_up_to_rows(after_rollback, expected)
    assert torch.equal(after_rollback.argmax(-1), expected.argmax(-1))


def test_repeated_partial_rollbacks(target):
    seq = torch.arange(2, 32)
    lm = CachedLM(target.model)
    lm.extend(seq[:10], last_only=True)
    for keep in (12, 13, 17, 21):  # accept 2, 1, 4, 4 of each 4-token proposal
        lm.extend(seq[lm.length : lm.length + 4])
        lm.truncate(keep)
    out = lm.extend(seq[21:24])
    expected = CachedLM(target.model).extend(seq[:24])[21:]
    assert same_up_to_rows(out, expected)


def test_the_last_hidden_state_follows_rollback_and_compaction(target):
    from specviz.engine.tree import build_tree

    def hidden_of(ids):  # final hidden state at the last position, computed from scratch
        out = target.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
        return out.hidden_states[-1][0, -1]

    seq = [5, 9, 13, 2, 40, 41, 7]
    lm = CachedLM(target.model, keep_hidden=True)
    lm.extend(torch.tensor(seq[:4]), last_only=True)
    assert torch.allclose(lm.last_hidden, hidden_of(seq[:4]), atol=1e-4)
    lm.extend(torch.tensor(seq[4:]))
    lm.truncate(5)  # keep 5 tokens: the hidden state of the 5th
    assert torch.allclose(lm.last_hidden, hidden_of(seq[:5]), atol=1e-4)
    tree = build_tree([[20, 21], [22, 23, 24]])
    lm.extend_tree(seq[5], tree)  # root = seq[5] at entry 5, nodes after it
    lm.keep(6, [2, 3])  # the path 22 23
    assert torch.allclose(lm.last_hidden, hidden_of(seq[:6] + [22, 23]), atol=1e-4)
    lm.extend_tree(9, build_tree([[30]]))
    lm.keep(lm.length - 1, [])  # nothing accepted: the root is the last entry
    assert torch.allclose(lm.last_hidden, hidden_of(seq[:6] + [22, 23, 9]), atol=1e-4)
