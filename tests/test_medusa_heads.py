"""Medusa heads: the official checkpoint layout loads strictly, the compact one shares the LM head."""

import json

import pytest
import torch

from specviz.drafters.medusa.heads import MedusaCheckpointError, MedusaHeads, load_medusa, save_medusa

HEADS, LAYERS = 5, 1


def official_state(hidden, vocab, heads=HEADS, layers=LAYERS, seed=0):
    """Keys exactly as published Medusa-1 files have them, written out by hand."""
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for h in range(heads):
        for layer in range(layers):
            state[f"{h}.{layer}.linear.weight"] = torch.randn(hidden, hidden, generator=gen) * 0.05
            state[f"{h}.{layer}.linear.bias"] = torch.randn(hidden, generator=gen) * 0.05
        state[f"{h}.{layers}.weight"] = torch.randn(vocab, hidden, generator=gen) * 0.05
    return state


def write(folder, state, base="tiny-target", heads_in_config=2, as_pt=True):
    folder.mkdir(parents=True, exist_ok=True)
    # like the published configs, this one understates the head count
    (folder / "config.json").write_text(
        json.dumps(
            {
                "base_model_name_or_path": f"someone/{base}",
                "medusa_num_heads": heads_in_config,
                "medusa_num_layers": LAYERS,
            }
        )
    )
    if as_pt:
        torch.save(state, folder / "medusa_lm_head.pt")
    else:
        from safetensors.torch import save_file

        save_file(state, str(folder / "medusa_lm_head.safetensors"))
    return folder


def test_an_official_checkpoint_loads_with_the_head_count_read_from_the_weights(tmp_path, target):
    hidden, vocab = target.model.config.hidden_size, target.vocab_size
    state = official_state(hidden, vocab)
    heads = load_medusa(write(tmp_path / "ckpt", state), target)
    assert len(heads.heads) == HEADS and not heads.compact
    x = torch.randn(3, hidden)
    got = heads(x)
    assert got.shape == (HEADS, 3, vocab)
    for h in range(HEADS):  # x + SiLU(Wx + b), then the head's own linear map
        w, b, out = state[f"{h}.0.linear.weight"], state[f"{h}.0.linear.bias"], state[f"{h}.1.weight"]
        expected = (x + torch.nn.functional.silu(x @ w.T + b)) @ out.T
        assert torch.allclose(got[h], expected, atol=1e-5)


def test_safetensors_weights_load_too(tmp_path, target):
    state = official_state(target.model.config.hidden_size, target.vocab_size, heads=3, layers=1)
    assert len(load_medusa(write(tmp_path / "st", state, as_pt=False), target).heads) == 3


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda s: s.pop("2.0.linear.bias"), "missing"),
        (lambda s: s.update({"1.0.extra.weight": torch.zeros(1)}), "unexpected"),
        (lambda s: s.update({"0.1.weight": torch.zeros(7, 64)}), "shape"),
        (lambda s: s.update({"x.y": torch.zeros(1)}), "key names"),
    ],
)
def test_a_damaged_checkpoint_fails_clearly(tmp_path, target, damage, words):
    state = official_state(target.model.config.hidden_size, target.vocab_size)
    damage(state)
    with pytest.raises(MedusaCheckpointError, match=words):
        load_medusa(write(tmp_path / "bad", state), target)


def test_heads_for_another_base_model_are_refused(tmp_path, target):
    state = official_state(target.model.config.hidden_size, target.vocab_size)
    with pytest.raises(MedusaCheckpointError, match="trained for 'someone/vicuna-7b-v1.3'"):
        load_medusa(write(tmp_path / "other", state, base="vicuna-7b-v1.3"), target)
    with pytest.raises(MedusaCheckpointError, match="no Medusa weights"):
        (tmp_path / "empty").mkdir()
        (tmp_path / "empty" / "config.json").write_text("{}")
        load_medusa(tmp_path / "empty", target)


def test_compact_heads_share_the_base_lm_head_and_round_trip(tmp_path, target):
    hidden, vocab = target.model.config.hidden_size, target.vocab_size
    heads = MedusaHeads(hidden, vocab, 3, 2, target.model.get_output_embeddings())
    assert all(".linear." in k for k in heads.heads.state_dict())  # only ResBlocks stored
    folder = save_medusa(heads, tmp_path / "compact", "tiny-target")
    loaded = load_medusa(folder, target)
    assert loaded.compact and len(loaded.heads) == 3
    x = torch.randn(2, hidden)
    assert torch.allclose(loaded(x), heads(x), atol=1e-6)
    official = MedusaHeads(hidden, vocab, 2, 1)
    again = load_medusa(save_medusa(official, tmp_path / "full", "tiny-target"), target)
    assert not again.compact and torch.allclose(again(x), official(x), atol=1e-6)


def test_shortlisted_heads_score_only_their_ids_and_round_trip(tmp_path, target):
    hidden, vocab = target.model.config.hidden_size, target.vocab_size
    torch.manual_seed(1)
    shortlist = torch.tensor(sorted(torch.randperm(vocab)[:20].tolist()))
    heads = MedusaHeads(hidden, vocab, 2, 1, target.model.get_output_embeddings(), shortlist)
    x = torch.randn(hidden)
    full = MedusaHeads(hidden, vocab, 2, 1, target.model.get_output_embeddings())
    full.heads.load_state_dict(heads.heads.state_dict())
    assert torch.allclose(heads(x), full(x)[:, shortlist], atol=1e-5)  # the same scores, restricted
    top = heads.top_ids(x, [3, 2])
    assert all(t in shortlist.tolist() for row in top for t in row)
    assert top[0] == shortlist[torch.topk(full(x)[0, shortlist], 3).indices].tolist()
    folder = save_medusa(heads, tmp_path / "short", "tiny-target", dtype=torch.bfloat16)
    assert json.loads((folder / "head_vocab.json").read_text()) == shortlist.tolist()
    loaded = load_medusa(folder, target)
    assert loaded.top_ids(x, [3, 2])[0][0] == top[0][0]


@pytest.mark.parametrize("content", ["[]", "[1, -2]", '{"a": 1}', "[1, 99999]", "not json"])
def test_a_bad_shortlist_fails_clearly(tmp_path, target, content):
    heads = MedusaHeads(target.model.config.hidden_size, target.vocab_size, 2, 1, target.model.get_output_embeddings())
    folder = save_medusa(heads, tmp_path / "bad", "tiny-target")
    (folder / "head_vocab.json").write_text(content)
    with pytest.raises(MedusaCheckpointError, match="head_vocab.json"):
        load_medusa(folder, target)
