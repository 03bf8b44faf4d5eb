import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(2)

from tiny import loaded, perturbed, tiny_llama, word_tokenizer  # noqa: E402

WORDS = [f"w{i}" for i in range(60)]


@pytest.fixture(scope="session")
def tokenizer():
    return word_tokenizer(WORDS)


@pytest.fixture(scope="session")
def target(tokenizer):
    return loaded(tiny_llama(len(tokenizer), seed=1), tokenizer, "tiny-target")


@pytest.fixture(scope="session")
def drafts(tokenizer, target):
    """Three drafts: the target itself, an unrelated model, and a noisy copy that partly agrees."""
    return {
        "same": target,
        "unrelated": loaded(tiny_llama(len(tokenizer), seed=2), tokenizer, "tiny-unrelated"),
        "partial": loaded(perturbed(target.model, seed=3, scale=0.3), tokenizer, "tiny-partial"),
    }


@pytest.fixture(scope="session")
def model_folder(tmp_path_factory, target, tokenizer):
    """The tiny target saved as a Hugging Face folder, to load through the CLI."""
    folder = tmp_path_factory.mktemp("tiny-model")
    target.model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
