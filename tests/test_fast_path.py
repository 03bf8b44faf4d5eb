"""The GPU fast path fails loudly and falls back: each of its pieces (loading with a device map, the static KV
cache, each CUDA graph capture) is made to fail here, on a CPU, by injection; the failure is one line naming the
piece, the model is set to the eager, dynamic-cache path, and a race still runs, identical to plain decoding."""

import importlib.util
from pathlib import Path

import pytest
from tiny import loaded, tiny_llama

from specviz.app.shelf import ModelShelf, PairPreset
from specviz.engine import fast_path, static_lm
from specviz.engine.cached_lm import CachedLM
from specviz.engine.static_lm import StaticLM, open_lm
from specviz.events import generated_ids
from specviz.runs import generate_named
from specviz.runtimes.transformers_runtime import load_model
from specviz.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


def fresh_target(tokenizer):
    """A tiny target forced onto the static cache, as a GPU would run it."""
    model = tiny_llama(len(tokenizer), seed=1)
    model.specviz_static = True
    return loaded(model, tokenizer, "tiny-fast")


def still_identical(target, drafts, tokenizer):
    prompt = tokenizer.encode("w1 w2 w3 w4")
    plain = generated_ids(generate_named(target, prompt, Settings(max_new_tokens=16)))
    events = generate_named(target, prompt, Settings(max_new_tokens=16, gamma=3), "draft", draft=drafts["partial"])
    return generated_ids(events) == plain


def test_the_fast_path_holds_on_a_cpu_and_says_nothing(tokenizer):
    target = fresh_target(tokenizer)
    assert fast_path.try_fast_path(target.model, target.name) == ""
    assert target.model.specviz_static is True and isinstance(open_lm(target.model, 64), StaticLM)


def test_a_static_cache_that_fails_is_named_and_the_dynamic_cache_runs(tokenizer, drafts, monkeypatch):
    target = fresh_target(tokenizer)

    def broken(self, ids, last_only=False):
        raise RuntimeError("injected: static cache write out of bounds")

    with monkeypatch.context() as patch:
        patch.setattr(StaticLM, "extend", broken)
        line = fast_path.try_fast_path(target.model, target.name)
    assert line.startswith("tiny-fast: the static KV cache failed (injected: static cache write out of bounds)")
    assert "\n" not in line and "eager, dynamic-cache path" in line
    assert target.model.specviz_static is False and type(open_lm(target.model, 4096)) is CachedLM
    assert still_identical(target, drafts, tokenizer)


@pytest.mark.parametrize("width", [1, 4])
def test_a_cuda_graph_capture_that_fails_is_named_with_its_width(tokenizer, drafts, monkeypatch, width):
    target = fresh_target(tokenizer)
    captured = []

    def capture(self, ids, positions, mask, last_only):
        """A CPU cannot capture: a stand-in graph that reruns the forward, failing at `width`."""
        captured.append(ids.shape[-1])
        if ids.shape[-1] == width:
            raise RuntimeError("injected: operation not permitted when stream is capturing")
        inputs = tuple(t.clone() for t in (ids, positions, mask))
        logits = self._call(*inputs, last_only)[0]
        self._reset_write_position()  # as a real capture leaves it: the replay writes the same entries again
        outputs = (logits.clone(), None)
        return _Replay(self, inputs, last_only, outputs), inputs, outputs, logits.clone()

    with monkeypatch.context() as patch:
        patch.setattr(static_lm, "graphs_allowed", lambda device: True)
        patch.setattr(fast_path, "graphs_allowed", lambda device: True)
        patch.setattr(StaticLM, "_capture", capture)
        line = fast_path.try_fast_path(target.model, target.name)
    assert line.startswith(f"tiny-fast: the CUDA graph of a {width}-token forward failed (")
    assert "injected: operation not permitted" in line and "\n" not in line
    assert target.model.specviz_static is False and captured[-1] == width
    assert still_identical(target, drafts, tokenizer)


class _Replay:
    """Stands in for a captured graph on a CPU: replaying runs the forward again on the captured buffers."""

    def __init__(self, lm, inputs, last_only, outputs):
        self.lm, self.inputs, self.last_only, self.outputs = lm, inputs, last_only, outputs

    def replay(self):
        logits, hidden = self.lm._call(*self.inputs, self.last_only)
        self.outputs[0].copy_(logits)


def test_a_device_map_load_that_fails_is_named_and_the_model_still_loads(model_folder, monkeypatch):
    from transformers import AutoModelForCausalLM

    original = AutoModelForCausalLM.from_pretrained.__func__

    def from_pretrained(cls, *args, **kwargs):
        if "device_map" in kwargs:
            raise RuntimeError("injected: accelerate cannot place the weights")
        return original(cls, *args, **kwargs)

    monkeypatch.setattr("specviz.models.loading.placement", lambda where: {"device_map": str(where)})
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", classmethod(from_pretrained))
    model = load_model(str(model_folder), "float32", "cpu")
    note = model.model.specviz_load_note
    assert note.startswith("loading with a device map failed (injected: accelerate cannot place the weights)")
    assert model.model.specviz_static is False and "\n" not in note


def test_the_app_warm_up_names_a_failure_and_its_race_runs(pair_folders, monkeypatch):
    """app.py's warm-up on the tiny pair with the static cache failing: one line, then the warm race runs."""
    spec = importlib.util.spec_from_file_location("specviz_app_main", ROOT / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    target, draft = pair_folders
    shelf = ModelShelf([PairPreset("tiny", str(target), str(draft))], "cpu")
    pair = shelf.get("tiny", "float32")
    for model in (pair.target.model, pair.draft.model):
        model.specviz_static = True

    def broken(self, ids, last_only=False):
        raise RuntimeError("injected: no kernel image for this device")

    said = []
    with monkeypatch.context() as patch:
        patch.setattr(StaticLM, "extend", broken)
        app.warm_up(shelf, "tiny", "float32", say=said.append)
    # the target's line; the pair then runs one path, so the draft has nothing left to try
    assert said == [
        f"{target}: the static KV cache failed (injected: no kernel image for this device); running the "
        "eager, dynamic-cache path"
    ]
    assert pair.target.model.specviz_static is False and pair.draft.model.specviz_static is False


def test_the_heads_a_pair_brings_load_with_it_before_any_race(pair_folders, pair_heads, pair_dflash, tmp_path):
    """Under ZeroGPU what a GPU call loads dies with its process: the shelf loads the pair's heads up front (app.py
    does so before launch), each kept with the target as a race finds it; a head that cannot load is one line."""
    target, draft = map(str, pair_folders)
    brings = (("medusa", str(pair_heads)), ("dflash", str(pair_dflash)), ("eagle", str(tmp_path / "none")))
    shelf = ModelShelf([PairPreset("tiny", target, draft, brings)], "cpu")
    pair = shelf.get("tiny", "float32")
    lines = shelf.load_heads()
    assert set(pair.target.companions) == {("medusa", str(pair_heads)), ("dflash", str(pair_dflash))}
    assert "loaded the DFlash (block drafting) of tiny" in lines and "loaded the Medusa heads (tree) of tiny" in lines
    assert any(line.startswith("eagle: not available: ") and "no config.json" in line for line in lines)


def test_the_warm_up_makes_every_cache_a_drafter_of_the_pair_keeps(pair_folders, pair_heads, pair_dflash):
    """Heads read the target's hidden states, so their drafters' target caches are caches of their own (and, on a
    GPU, graphs of their own): the warm-up races each drafter the pair can run, so that a visitor's first Medusa or
    DFlash race finds its cache made instead of paying for it inside the timed race."""
    from specviz.app.device_calls import DeviceCalls
    from specviz.app.request import read_request

    spec = importlib.util.spec_from_file_location("specviz_app_main", ROOT / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    target, draft = map(str, pair_folders)
    brings = (("medusa", str(pair_heads)), ("dflash", str(pair_dflash)))
    shelf = ModelShelf([PairPreset("tiny", target, draft, brings)], "cpu")
    pair = shelf.get("tiny", "float32")
    for model in (pair.target.model, pair.draft.model):
        model.specviz_static = True
    said = []
    app.warm_up(shelf, "tiny", "float32", say=said.append)
    assert said == []
    made = set(static_lm.free_slots(pair.target.model))
    kept = {layers for _, layers in made}
    assert len(kept) >= 3  # plain decoding's cache, Medusa's and DFlash's, each keeping other hidden states
    for drafter in ("medusa", "dflash", "draft"):
        ask = dict(pair="tiny", drafter=drafter, dtype="float32", prompt="w1 w2 w3 w4", max_new_tokens=12)
        assert [p.kind for p in DeviceCalls(shelf).race(read_request(ask, shelf))][-1] == "end"
    assert set(static_lm.free_slots(pair.target.model)) == made  # no race made a cache the warm-up had not


def test_cuda_attention_leaves_out_the_kernel_that_plans_per_shape(model_folder, monkeypatch):
    """cuDNN's attention builds a plan for every new shape (seconds over a head's first race on a GPU): a model
    loaded onto CUDA turns it off for the process; a CPU load leaves the setting alone."""
    import torch

    from specviz.models import device, loading

    calls = []
    monkeypatch.setattr(torch.backends.cuda, "enable_cudnn_sdp", calls.append)
    device.steady_attention(torch.device("cpu"))
    assert calls == []
    device.steady_attention(torch.device("cuda"))
    assert calls == [False]
    seen = []
    monkeypatch.setattr(loading, "steady_attention", seen.append)
    load_model(str(model_folder), "float32", "cpu")
    assert seen == [torch.device("cpu")]
