"""Self-distilled Medusa training on a tiny model: the loss falls in a few steps and the heads then draft."""

import torch

from specviz.drafters.medusa.heads import load_medusa, save_medusa
from specviz.drafters.medusa.medusa_drafter import MedusaDrafter
from specviz.engine import generate
from specviz.events import generated_ids, summarize
from specviz.settings import Settings
from specviz.training.distill import self_distilled_texts
from specviz.training.medusa import MedusaTraining, train_heads


def test_training_lowers_the_loss_and_the_heads_help(target, tokenizer, tmp_path):
    prompts = [" ".join(f"w{(i * 7 + j * 3) % 60}" for j in range(5)) for i in range(24)]
    texts = self_distilled_texts(target, prompts, max_new_tokens=40)
    heads, report = train_heads(target, texts, MedusaTraining(heads=3, steps=60, lr=3e-3, train_batch=128, shortlist=0))
    assert report.last_loss < report.first_loss * 0.9
    assert len(report.head_accuracy) == 3 and all(0 <= a <= 1 for a in report.head_accuracy)
    folder = save_medusa(heads, tmp_path / "heads", target.name)
    reloaded = load_medusa(folder, target)
    ids = tokenizer.encode("w1 w4 w7")
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=40)))
    settings = Settings(max_new_tokens=40, gamma=3)
    events = list(generate(target, ids, settings, MedusaDrafter(reloaded, [(0,), (0, 0), (1,), (0, 0, 0)])))
    assert generated_ids(events) == plain
    assert summarize(events).target_forwards < 40


def test_shortlisted_training_keeps_only_answer_ids_and_stays_exact(target, tokenizer, tmp_path):
    prompts = [" ".join(f"w{(i * 5 + j) % 60}" for j in range(4)) for i in range(16)]
    texts = self_distilled_texts(target, prompts, max_new_tokens=30, samples=2, batch=5)
    assert [t.ids[: t.answer_from] for t in texts[:2]] == [tokenizer.encode(prompts[0])] * 2
    assert texts[0].ids != texts[1].ids  # one greedy, one sampled text per prompt
    heads, report = train_heads(target, texts, MedusaTraining(heads=2, steps=40, lr=3e-3, shortlist=24))
    assert report.last_loss < report.first_loss and len(heads.shortlist) == 24
    answers = [t for text in texts for t in text.ids[text.answer_from :]]
    assert max(answers, key=answers.count) in heads.shortlist.tolist()
    reloaded = load_medusa(save_medusa(heads, tmp_path / "short", target.name), target)
    ids = tokenizer.encode("w3 w4 w5")
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=30)))
    assert (
        generated_ids(
            generate(target, ids, Settings(max_new_tokens=30, gamma=2), MedusaDrafter(reloaded, [(0,), (0, 0), (1,)]))
        )
        == plain
    )


def test_local_text_is_teacher_forced_with_the_base_models_own_labels(target, tokenizer, tmp_path):
    from specviz.training.distill import local_texts
    from specviz.training.medusa import _rows

    (tmp_path / "a.txt").write_text(" ".join(f"w{(i * 7) % 60}" for i in range(80)))
    texts = local_texts(target, [str(tmp_path)], tokens=50, chunk=30)
    assert [len(t.ids) for t in texts] == [30, 20] and all(t.teacher_forced and t.answer_from == 0 for t in texts)
    x, y = _rows(target, texts[:1], heads=2)
    logits = target.model(input_ids=torch.tensor([texts[0].ids])).logits[0]
    assert y[0].tolist() == logits[1:3].argmax(-1).tolist()  # head k at t = 0: the base's own guess for t + 2 + k
    assert x.shape == (30 - 1 - 2, target.model.config.hidden_size)
