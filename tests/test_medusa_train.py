"""Self-distilled Medusa training on a tiny model: the loss falls in a few steps and the heads then draft."""

from specviz.engine import generate
from specviz.events import generated_ids, summarize
from specviz.medusa.drafter import MedusaDrafter
from specviz.medusa.heads import load_medusa, save_medusa
from specviz.medusa.train import self_distilled_texts, train_heads
from specviz.settings import Settings


def test_training_lowers_the_loss_and_the_heads_help(target, tokenizer, tmp_path):
    prompts = [" ".join(f"w{(i * 7 + j * 3) % 60}" for j in range(5)) for i in range(24)]
    texts = self_distilled_texts(target, prompts, max_new_tokens=40)
    heads, report = train_heads(target, texts, num_heads=3, steps=60, lr=3e-3, batch=128)
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
