"""The Medusa drafter through the engine: whatever the heads guess, greedy output equals plain."""

import pytest
import torch

from specviz.drafters.medusa.heads import MedusaHeads
from specviz.drafters.medusa.medusa_drafter import DEFAULT_CHOICES, MedusaDrafter, medusa_tree
from specviz.drafters.medusa.medusa_drafter import TREES as MEDUSA_TREES
from specviz.engine import generate
from specviz.errors import InvalidRequest
from specviz.events import generated_ids, summarize
from specviz.settings import Settings


def copying_heads(target, count=4):
    """Compact heads whose ResBlocks add nothing: each head repeats the target's own next-token guess."""
    heads = MedusaHeads(
        target.model.config.hidden_size, target.vocab_size, count, 1, target.model.get_output_embeddings()
    )
    with torch.no_grad():
        for p in heads.parameters():
            p.zero_()
    return heads


def random_heads(target, count=4, seed=0):
    torch.manual_seed(seed)
    return MedusaHeads(target.model.config.hidden_size, target.vocab_size, count, 1)


@pytest.mark.parametrize("make", [copying_heads, random_heads])
@pytest.mark.parametrize("prompt", ["w1 w2 w3 w4", "w5 w5 w5 w5 w5 w5", "w33 w12"])
def test_greedy_medusa_equals_plain(target, tokenizer, make, prompt):
    ids = tokenizer.encode(prompt)
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=40)))
    for gamma in (1, 2, 4):
        settings = Settings(max_new_tokens=40, gamma=gamma)
        events = list(generate(target, ids, settings, MedusaDrafter(make(target))))
        assert generated_ids(events) == plain, f"gamma={gamma}"
        assert any(e.candidates for e in events)


def test_copying_heads_get_accepted_where_the_target_repeats_itself(target, tokenizer):
    ids = tokenizer.encode("w5 w5 w5 w5 w5 w5")
    events = list(generate(target, ids, Settings(max_new_tokens=60, gamma=4), MedusaDrafter(copying_heads(target))))
    assert summarize(events).target_forwards < 60  # tiny random models fall into loops; copying heads ride them


def test_a_tree_deeper_than_the_heads_is_refused(target):
    with pytest.raises(InvalidRequest, match="only 2"):
        MedusaDrafter(copying_heads(target, count=2), DEFAULT_CHOICES)


def test_shortlisted_heads_still_give_plain_output(target, tokenizer):
    shortlist = torch.arange(0, target.vocab_size, 3)
    heads = MedusaHeads(
        target.model.config.hidden_size, target.vocab_size, 4, 1, target.model.get_output_embeddings(), shortlist
    )
    ids = tokenizer.encode("w5 w5 w5 w5 w5 w5")
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=40)))
    events = list(
        generate(target, ids, Settings(max_new_tokens=40, gamma=4), MedusaDrafter(heads, MEDUSA_TREES["wide"]))
    )
    assert generated_ids(events) == plain
    assert all(t % 3 == 0 for e in events for c in (e.candidates or []) for t in c)


def test_named_and_custom_trees():
    assert medusa_tree("chain") == ((0,), (0, 0), (0, 0, 0), (0, 0, 0, 0))
    assert medusa_tree("[[0], [0, 1], [2]]") == ((0,), (0, 1), (2,))
    for bad in ("[]", "[[0], []]", "[[-1]]", "[[0.5]]", "[[true]]", "bushy", "[[40]]", "[0, 1]"):
        with pytest.raises(InvalidRequest, match="Medusa tree"):
            medusa_tree(bad)


def test_settings_check_the_acceptance_mode():
    assert Settings(acceptance="greedy", temperature=0.0).acceptance == "greedy"
    with pytest.raises(InvalidRequest, match="greedy acceptance needs temperature 0"):
        Settings(acceptance="greedy", temperature=0.7)
    with pytest.raises(InvalidRequest, match="acceptance must be one of"):
        Settings(acceptance="eager")
