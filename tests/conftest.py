"""Fixtures every test module may take, and the tiers: each test is marked here by what it needs, never in its file.

Marks (registered in pyproject.toml), from the fixtures a test takes, directly or through other fixtures (a module's
own server fixture takes `launch_app`, so its tests are marked too):
- server: starts `python app.py` (the `app_server` or `launch_app` fixture);
- browser: drives chromium (the `browser` fixture);
- model: loads a real offline model (the `smollm` fixture);
- stats: draws thousands of seeded runs against the target's exact law (the `draws` fixture);
- compiler: torch.compile really compiles a model's forward (the `compiling` fixture);
- thorough: a property drawn over many more examples than the fast tier's (the `thorough` fixture);
- cluster: starts a local Ray cluster of two CPUs (the `ray_cluster` fixture);
- process: runs Python in a process of its own, which imports torch, transformers or gradio afresh (seconds each;
  the `new_process` fixture);
- slow: any of the above: `python -m pytest -m "not slow"` is the fast tier.
"""

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))
# Property and fuzz tests (Hypothesis) draw derandomized: the examples follow from each test's own code, so CI
# draws what a run here drew. No deadline: a tiny model's first forward in a worker can take longer than the next
# hundred. A test may take pytest fixtures (session-scoped ones, built once; never reset between examples).
settings.register_profile(
    "specviz", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
settings.load_profile("specviz")

# The precision a command or the app loads when none is named: bfloat16, as the tests were written for; the default
# (auto: measured on the device) has its own tests, on injected cost tables (test_precision_choice.py).
os.environ["SPECVIZ_DTYPE"] = os.environ.get("SPECVIZ_DTYPE") or "bfloat16"
# The runtime likewise: transformers, unless a test names another (auto, which measures llama.cpp beside it, has its
# own tests: test_llama_cli.py, test_runtime_choice.py).
os.environ["SPECVIZ_RUNTIME"] = os.environ.get("SPECVIZ_RUNTIME") or "transformers"

# Every test's call against its tier's time budget (tests/budget.py); pytester runs pytest inside a test.
pytest_plugins = ("budget", "pytester")

# What the fixtures build with (torch, transformers, specviz) is imported where tests are collected, never in the
# xdist controller, which runs no test: importing them there costs seconds of the cores the workers start on.

MARKS_BY_FIXTURE = {
    "app_server": "server",
    "launch_app": "server",
    "browser": "browser",
    "smollm": "model",
    "draws": "stats",
    "compiling": "compiler",
    "thorough": "thorough",
    "ray_cluster": "cluster",
    "new_process": "process",
}
SLOW = {"server", "browser", "model", "stats", "compiler", "thorough", "cluster", "process"}


# A whole family's time budget (tests/budget.py), where every test of it needs more than the slow tier's 60 s; a test
# may still carry its own.
BUDGET_BY_MARK = {"stats": (240, "thousands of whole seeded runs of the tiny models against the target's exact law")}


def pytest_collection_modifyitems(config, items):
    import torch

    # One thread per pytest-xdist worker (two workers share the two cores), both threads in a run without workers.
    torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else 2)
    for item in items:
        marks = {MARKS_BY_FIXTURE[f] for f in getattr(item, "fixturenames", ()) if f in MARKS_BY_FIXTURE}
        for mark in sorted(marks | ({"slow"} if marks & SLOW else set())):
            item.add_marker(mark)
        for mark in sorted(marks & set(BUDGET_BY_MARK)):
            if item.get_closest_marker("budget") is None:
                item.add_marker(pytest.mark.budget(*BUDGET_BY_MARK[mark]))


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster on this machine's two cores (Ray, the cluster extra, is in requirements-dev.txt)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def one_thread(env: dict | None) -> dict:
    """`env` (or this process's environment) with one torch thread, unless it names its own: a server or process a
    test starts shares two cores with two test workers, and the tiny models' products gain nothing from a second
    thread that would take a core from the others."""
    return {"OMP_NUM_THREADS": "1", **(os.environ if env is None else env)}


@pytest.fixture(scope="session")
def new_process():
    """`run(*args, **kwargs)`: `python *args` in a process of its own, its output captured as text (other keywords go
    to subprocess.run). What a test checks there: a fresh interpreter's imports, an installed command, exit codes."""
    import subprocess

    def run(*args, **kwargs):
        kwargs["env"] = one_thread(kwargs.get("env"))
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, **kwargs)

    return run


@pytest.fixture(scope="session")
def thorough():
    """Marks a property test that draws many examples (tests/test_properties.py): the slow tier's share."""


@pytest.fixture
def compiling(monkeypatch):
    """The static cache's forwards go through torch.compile, as SPECVIZ_COMPILE=1 asks on a GPU."""
    monkeypatch.setenv("SPECVIZ_COMPILE", "1")


@pytest.fixture(scope="session")
def tokenizer():
    from tiny import PAIR_WORDS, word_tokenizer

    return word_tokenizer(PAIR_WORDS)


@pytest.fixture(scope="session")
def target(tokenizer):
    from tiny import loaded, tiny_llama

    return loaded(tiny_llama(len(tokenizer), seed=1), tokenizer, "tiny-target")


@pytest.fixture(scope="session")
def drafts(tokenizer, target):
    """Four drafts: the target itself, an unrelated model, a noisy copy that partly agrees, and that copy in int8."""
    from tiny import loaded, perturbed, tiny_llama

    from specviz.models.quantize import int8_rows

    return {
        "same": target,
        "unrelated": loaded(tiny_llama(len(tokenizer), seed=2), tokenizer, "tiny-unrelated"),
        "partial": loaded(perturbed(target.model, seed=3, scale=0.3), tokenizer, "tiny-partial"),
        "int8": loaded(int8_rows(perturbed(target.model, seed=3, scale=0.3)), tokenizer, "tiny-partial-int8"),
    }


@pytest.fixture(scope="session")
def gguf_pair(tmp_path_factory, target, drafts, tokenizer):
    """The tiny target and its partly agreeing draft written as GGUF files and loaded by the llama.cpp runtime
    (float32 weights): {"target", "draft", "unrelated"} (tests/tiny_gguf.py)."""
    from tiny_gguf import load_tiny, save_gguf

    folder = tmp_path_factory.mktemp("tiny-gguf")
    return {
        name: load_tiny(save_gguf(drafts[which].model, folder / f"{name}.gguf"), tokenizer, f"gguf-{name}")
        for name, which in (("target", "same"), ("draft", "partial"), ("unrelated", "unrelated"))
    }


@pytest.fixture(scope="session")
def pair_folders_with_gguf(tmp_path_factory, pair_folders):
    """The tiny pair's folders, each also holding its model as a GGUF: transformers reads the folder, llama.cpp the
    file in it (tests/tiny_gguf.py)."""
    import shutil

    from tiny_gguf import save_gguf
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("pair-gguf")
    out = []
    for folder in pair_folders:
        copy = shutil.copytree(folder, root / folder.name)
        save_gguf(AutoModelForCausalLM.from_pretrained(copy), copy / "model.gguf")
        out.append(copy)
    return out


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
    from tiny import save_pair

    return save_pair(tmp_path_factory.mktemp("tiny-pair"))


@pytest.fixture(scope="session")
def pair_heads(pair_folders):
    """Compact Medusa heads for the tiny pair's target that repeat its own next-token guess (zero ResBlocks)."""
    from tiny import save_zero_medusa

    return save_zero_medusa(pair_folders[0], pair_folders[0].parent / "heads")


@pytest.fixture(scope="session")
def pair_eagle(pair_folders):
    """An EAGLE head (random weights, specviz's layout) for the tiny pair's target: drafts, rarely accepted."""
    from tiny import save_random_eagle

    return save_random_eagle(pair_folders[0], pair_folders[0].parent / "eagle")


@pytest.fixture(scope="session")
def pair_dflash(pair_folders):
    """A DFlash drafter (random weights, the published layout) for the tiny pair's target: drafts, rarely accepted."""
    from tiny import save_random_dflash

    return save_random_dflash(pair_folders[0], pair_folders[0].parent / "dflash")


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
    env = one_thread(env)
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
def launch_app():
    """serve(), for a test or fixture that needs an app of its own (other flags, another environment)."""
    return serve


@pytest.fixture(scope="session")
def app_server(launch_app, pair_folders, pair_heads, pair_eagle, pair_dflash):
    """The app serving the tiny pair with every drafter's heads, shared by the app and browser tests: (url, the pair's
    menu label)."""
    proc, url = launch_app(pair_folders, pair_heads, pair_eagle, extra=("--dflash", str(pair_dflash)))
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


@pytest.fixture(scope="session")
def smollm():
    """SmolLM2-135M-Instruct in fp32, the real offline model the CI installs (converted once, then cached)."""
    from specviz.runtimes.transformers_runtime import load_model

    return load_model("smollm2-135m-instruct", dtype="float32", device="cpu")


@pytest.fixture(scope="session")
def draws():
    """Seeded speculative runs counted by their first tokens (tests/laws.py): what a test of the sampling law takes."""
    from laws import Draws

    return Draws()


@pytest.fixture(scope="session")
def small():
    """Vocabulary of 8 so the joint law of two tokens has few enough cells to test: (target, draft, prompt)."""
    import torch
    from tiny import loaded, perturbed, tiny_llama, word_tokenizer

    tok = word_tokenizer(["a", "b", "c", "d", "e", "f"])
    target_model = tiny_llama(len(tok), seed=11, sharpness=0.1)  # spread-out p: max about 0.3
    with torch.no_grad():
        target_model.lm_head.weight[0] = target_model.lm_head.weight[2] * 0.5  # make EOS a real outcome
    draft_model = perturbed(target_model, seed=12, scale=0.5)  # alpha about 0.85: accepts and rejects both common
    return loaded(target_model, tok), loaded(draft_model, tok), tok.encode("a b c")


@pytest.fixture(scope="session")
def sensitive():
    """A vocabulary of 6 and a target whose next token depends strongly on the context and on positions (a sharper
    head and attention than `small`, fast-turning rotary positions), so a stale, missing or misplaced cache entry
    moves the law of later tokens: (target, draft, tokenizer)."""
    import torch
    from tiny import loaded, perturbed, tiny_llama, word_tokenizer

    tok = word_tokenizer(["a", "b", "c", "d"])
    target_model = tiny_llama(len(tok), seed=21, sharpness=1.5, rope_theta=2.0)  # neighbouring positions differ a lot
    with torch.no_grad():
        target_model.lm_head.weight[0] = target_model.lm_head.weight[2] * 0.3  # EOS possible, not dominant
        for layer in target_model.model.layers:  # sharp attention: which entry sits where, and when, matters
            layer.self_attn.q_proj.weight.mul_(12)
            layer.self_attn.k_proj.weight.mul_(12)
    draft = loaded(perturbed(target_model, seed=22, scale=0.5), tok)
    return loaded(target_model, tok), draft, tok
