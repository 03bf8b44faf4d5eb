import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(2)

from tiny import (  # noqa: E402
    PAIR_WORDS,
    loaded,
    perturbed,
    save_pair,
    save_random_eagle,
    save_zero_medusa,
    tiny_llama,
    word_tokenizer,
)

WORDS = PAIR_WORDS


@pytest.fixture(scope="session")
def tokenizer():
    return word_tokenizer(WORDS)


@pytest.fixture(scope="session")
def target(tokenizer):
    return loaded(tiny_llama(len(tokenizer), seed=1), tokenizer, "tiny-target")


@pytest.fixture(scope="session")
def drafts(tokenizer, target):
    """Four drafts: the target itself, an unrelated model, a noisy copy that partly agrees, and that copy in int8."""
    from specviz.models.quantize import int8_dynamic

    return {
        "same": target,
        "unrelated": loaded(tiny_llama(len(tokenizer), seed=2), tokenizer, "tiny-unrelated"),
        "partial": loaded(perturbed(target.model, seed=3, scale=0.3), tokenizer, "tiny-partial"),
        "int8": loaded(int8_dynamic(perturbed(target.model, seed=3, scale=0.3)), tokenizer, "tiny-partial-int8"),
    }


@pytest.fixture(scope="session")
def model_folder(tmp_path_factory, target, tokenizer):
    """The tiny target saved as a Hugging Face folder, to load through the CLI."""
    folder = tmp_path_factory.mktemp("tiny-model")
    target.model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def pair_folders(tmp_path_factory):
    """A tiny target (context 4096, room for long runs to stop) and a partly agreeing draft, as folders."""
    return save_pair(tmp_path_factory.mktemp("tiny-pair"))


@pytest.fixture(scope="session")
def pair_heads(pair_folders):
    """Compact Medusa heads for the tiny pair's target that repeat its own next-token guess (zero ResBlocks)."""
    return save_zero_medusa(pair_folders[0], pair_folders[0].parent / "heads")


@pytest.fixture(scope="session")
def pair_eagle(pair_folders):
    """An EAGLE head (random weights, specviz's layout) for the tiny pair's target: drafts, rarely accepted."""
    return save_random_eagle(pair_folders[0], pair_folders[0].parent / "eagle")


def serve(pair_folders, pair_heads, pair_eagle=None, extra=(), env=None):
    """`python app.py` serving the tiny pair on a free port (with `extra` flags, in `env`): (the process, its url)."""
    import socket
    import subprocess
    import tempfile
    import time

    from gradio_client import Client

    log = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: a long soak must never block on a full pipe
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    target, draft = pair_folders
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen(
        [
            sys.executable,
            "app.py",
            "--port",
            str(port),
            "--target",
            str(target),
            "--draft",
            str(draft),
            "--medusa",
            str(pair_heads),
            *(["--eagle", str(pair_eagle)] if pair_eagle else []),
            *extra,
        ],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=log,
        text=True,
        env=env,
    )
    proc.log = log
    url = f"http://127.0.0.1:{port}/"
    deadline = time.time() + 120
    while True:
        if proc.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"app.py exited: {log.read()[-2000:]}")
        try:
            Client(url, verbose=False)
            return proc, url
        except Exception:
            if time.time() > deadline:
                proc.kill()
                raise
            time.sleep(0.5)


@pytest.fixture(scope="session")
def app_server(pair_folders, pair_heads, pair_eagle):
    """The app serving the tiny pair, shared by the app and browser tests: (url, the pair's menu label)."""
    proc, url = serve(pair_folders, pair_heads, pair_eagle)
    target, draft = pair_folders
    yield url, f"{target} ← {draft}"
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium through Playwright, one per test module (tests/pages.py opens the app in it)."""
    from pages import CHROMIUM
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield launched
        launched.close()
