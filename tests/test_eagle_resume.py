"""EAGLE training in several runs: a run stopped and taken up again from its training state ends with the very head
an uninterrupted run gives, and a state is refused for other texts or another window width."""

import pytest
import torch
from test_eagle import greedy_answers

from specviz.drafters.eagle.eagle_checkpoint import EagleCheckpointError
from specviz.training.eagle import EagleTraining, read_features, train_eagle

SETUP = dict(
    lr=3e-3,
    train_batch=4,
    window=24,
    unroll=2,
    shortlist=0,
    init="pass-through",
    intermediate_size=64,
    held_out=0.2,
    depth=3,
)


def run(target, features, **how):
    return train_eagle(target, features, EagleTraining(**{**SETUP, **how}))


@pytest.fixture(scope="module")
def features(target):
    return read_features(target, greedy_answers(target, prompts=10, prompt_length=5, tokens=50, seed=3))


def weights(head):
    return {k: v.clone() for k, v in head.state_dict().items()}


def test_a_stopped_run_goes_on_to_the_uninterrupted_head(target, features, tmp_path):
    straight, report = run(target, features, steps=9)
    state = tmp_path / "state.pt"
    first, paused = run(target, features, steps=9, checkpoint=state, save_every=2, until_step=5)
    assert paused.steps == 5 and state.is_file()
    assert any(not torch.equal(a, b) for a, b in zip(weights(first).values(), weights(straight).values()))
    resumed, final = run(target, features, steps=9, checkpoint=state, save_every=2)
    assert final.steps == 9
    for (name, a), b in zip(weights(resumed).items(), weights(straight).values()):
        assert torch.equal(a, b), name
    assert final.last_loss == report.last_loss and final.first_loss == report.first_loss
    assert final.acceptance == report.acceptance
    again, _ = run(target, features, steps=9, checkpoint=state)  # nothing left to do
    assert all(torch.equal(a, b) for a, b in zip(weights(again).values(), weights(straight).values()))


def test_a_state_is_refused_for_other_texts_or_another_width(target, features, tmp_path):
    state = tmp_path / "state.pt"
    run(target, features, steps=2, checkpoint=state)
    with pytest.raises(EagleCheckpointError, match="other texts"):
        run(target, features[:-1], steps=4, checkpoint=state)
    with pytest.raises(EagleCheckpointError, match="width 24, not 16"):
        run(target, features, steps=4, checkpoint=state, window=16)
    state.write_bytes(b"not a state")
    with pytest.raises(EagleCheckpointError, match="cannot read the training state"):
        run(target, features, steps=4, checkpoint=state)
