"""torch.compile over the static cache's forward, run here on the CPU (a GPU's path, asked for with
SPECVIZ_COMPILE=1): the warm-up compiles it, a race through it is plain decoding's, and a compile that fails is
named in one line while the static cache runs uncompiled."""

import pytest
import torch
from test_fast_path import fresh_target, still_identical

from specviz.engine import compiled, fast_path
from specviz.engine.compiled import compile_allowed


@pytest.mark.budget(120, "torch.compile really compiles the tiny model's forward, once per shape")
def test_a_race_through_the_compiled_forward_is_plain_decodings(tokenizer, drafts, monkeypatch, compiling):
    target, widths, real = fresh_target(tokenizer), [], torch.compile

    def recording(model, **options):
        fused = real(model, **options)

        def forward(**inputs):
            widths.append(inputs["input_ids"].shape[-1])
            return fused(**inputs)

        return forward

    monkeypatch.setattr(compiled.torch, "compile", recording)
    assert fast_path.try_fast_path(target.model, target.name) == ""
    assert target.model.specviz_static is True and target.model.specviz_compile is True
    assert widths == [1, 4]  # compiled at warm-up: a one-token forward and a wider one
    assert still_identical(target, drafts, tokenizer)
    assert len(widths) > 10 and {1, 4} < set(widths)  # the race's forwards went through it, of several widths


def test_a_compile_that_fails_is_named_and_the_static_cache_runs_uncompiled(tokenizer, drafts, monkeypatch):
    monkeypatch.setenv("SPECVIZ_COMPILE", "1")
    target = fresh_target(tokenizer)

    def broken(model, **options):
        def forward(**inputs):
            raise RuntimeError("injected: InductorError: no working C++ compiler\nat line 2")

        return forward

    monkeypatch.setattr(compiled.torch, "compile", broken)
    line = fast_path.try_fast_path(target.model, target.name)
    assert line == (
        "tiny-fast: torch.compile of the forward failed (RuntimeError: injected: InductorError: no working C++ "
        "compiler); running it uncompiled"
    )
    assert target.model.specviz_static is True and target.model.specviz_compile is False
    assert still_identical(target, drafts, tokenizer)


def test_compile_is_asked_for_and_never_in_a_zero_gpu_worker(tokenizer, monkeypatch):
    target = fresh_target(tokenizer)
    assert not compile_allowed(target.model)  # off unless asked
    monkeypatch.setenv("SPECVIZ_COMPILE", "1")
    assert compile_allowed(target.model)
    target.model.specviz_compile = False  # as a failed warm-up leaves it
    assert not compile_allowed(target.model)
    target.model.specviz_compile = True
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    assert not compile_allowed(target.model)


def test_a_compile_that_gives_other_logits_is_named_and_not_used(tokenizer, drafts, monkeypatch):
    monkeypatch.setenv("SPECVIZ_COMPILE", "1")
    target = fresh_target(tokenizer)

    def wrong(model, **options):
        def forward(**inputs):
            out = model(**inputs)
            out.logits = out.logits.flip(-1)  # a graph that scrambles its output
            return out

        return forward

    monkeypatch.setattr(compiled.torch, "compile", wrong)
    line = fast_path.try_fast_path(target.model, target.name)
    assert line.startswith("tiny-fast: torch.compile of the forward failed (its logits at 1 tokens differ from the ")
    assert line.endswith("of their norm); running it uncompiled") and "\n" not in line
    assert target.model.specviz_compile is False and still_identical(target, drafts, tokenizer)
