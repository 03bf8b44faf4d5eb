"""Checkpoint folders under fuzz: a tiny target's Medusa heads, EAGLE head and DFlash drafter, saved, then damaged by
a machine (a config field given junk or taken away, config.json replaced by junk bytes, a tensor given another
shape, dropped or joined by a stray one). Loading one either works or raises the loader's own error in one line; the
target's weights are never touched, and the intact folder still loads after a damaged one failed."""

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file
from tiny import save_pair, save_random_dflash, save_random_eagle, save_zero_medusa

from specviz.drafters.dflash.dflash_checkpoint import load_dflash
from specviz.drafters.eagle.eagle_checkpoint import load_eagle
from specviz.drafters.medusa.heads import load_medusa
from specviz.errors import SpecvizError
from specviz.runtimes.transformers_runtime import open_target

LOADERS = {"medusa": load_medusa, "eagle": load_eagle, "dflash": load_dflash}

junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "x" * 5000, "<b>", "\ud800", "qwen3", "llama"]),
    st.lists(st.integers(-3, 40), max_size=4),
    st.dictionaries(st.sampled_from(["mask_token_id", "target_layer_ids", "x"]), st.integers(-3, 40), max_size=2),
)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The tiny target, loaded as a run loads it, and each kind's checkpoint folder for it."""
    root = tmp_path_factory.mktemp("checkpoints")
    target_folder, _ = save_pair(root)
    folders = {
        "medusa": save_zero_medusa(target_folder, root / "medusa"),
        "eagle": save_random_eagle(target_folder, root / "eagle"),
        "dflash": save_random_dflash(target_folder, root / "dflash"),
    }
    return open_target(str(target_folder), "float32", "cpu"), folders


def fingerprint(model) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode() + tensor.detach().contiguous().cpu().numpy().tobytes())
    return digest.hexdigest()


@st.composite
def damage(draw, folder: Path):
    """A function that damages a copy of `folder` one way, and what it did, in words."""
    config = json.loads((folder / "config.json").read_text())
    weights = sorted(folder.glob("*.safetensors"))[0]
    way = draw(st.sampled_from(["field", "nested field", "config bytes", "shape", "dropped", "stray"]))
    if way in ("field", "nested field"):
        nested = [k for k, v in config.items() if isinstance(v, dict)]
        where = config[draw(st.sampled_from(nested))] if way == "nested field" and nested else config
        key, value = draw(st.sampled_from(sorted(where))), draw(st.one_of(junk, st.just("<gone>")))
        if value == "<gone>":
            del where[key]
        else:
            where[key] = value

        def apply(copy: Path):
            (copy / "config.json").write_text(json.dumps(config, ensure_ascii=True))

        return apply, f"{way} {key}={value!r}"[:120]
    if way == "config bytes":
        junk_bytes = draw(st.binary(max_size=40) | st.sampled_from([b"[]", b"null", b"{", b'"x"', b"{}"]))
        return (lambda copy: (copy / "config.json").write_bytes(junk_bytes)), f"config.json = {junk_bytes!r}"
    state = load_file(weights)
    name = draw(st.sampled_from(sorted(state)))
    if way == "shape":
        old = state[name]
        sizes = draw(st.lists(st.integers(1, 9), min_size=1, max_size=3))
        state[name] = torch.zeros(sizes, dtype=old.dtype)
        described = f"{name} shaped {sizes} (was {list(old.shape)})"
    elif way == "dropped":
        del state[name]
        described = f"{name} dropped"
    else:
        state["stray.weight"] = torch.zeros(2, 2)
        described = "a stray tensor"
    return (lambda copy: save_file(state, copy / weights.name)), described


def check_load(saved, kind: str, case) -> None:
    target, folders = saved
    apply, described = case
    before = fingerprint(target.model)
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / kind
        shutil.copytree(folders[kind], copy)
        apply(copy)
        try:
            LOADERS[kind](str(copy), target)
        except SpecvizError as exc:
            message = str(exc)
            assert "\n" not in message and 0 < len(message) < 600, (described, message[:300])
        except Exception as exc:  # any other error reaches the user as a traceback
            raise AssertionError(f"{kind}, {described}: {type(exc).__name__}: {exc}"[:600]) from None
    assert fingerprint(target.model) == before, f"{kind}, {described}: the target's weights changed"
    LOADERS[kind](str(folders[kind]), target)  # the intact folder still loads


@pytest.mark.parametrize("kind", sorted(LOADERS))
def test_a_damaged_checkpoint_loads_or_fails_in_one_line(saved, kind):
    @settings(max_examples=30)
    @given(damage(saved[1][kind]))
    def check(case):
        check_load(saved, kind, case)

    check()


@pytest.mark.parametrize("kind", sorted(LOADERS))
def test_a_damaged_checkpoint_loads_or_fails_in_one_line_thoroughly(thorough, saved, kind):
    @settings(max_examples=300)
    @given(damage(saved[1][kind]))
    def check(case):
        check_load(saved, kind, case)

    check()


def with_config(change):
    """A damage that rewrites config.json through `change(config)`."""

    def apply(copy: Path):
        config = json.loads((copy / "config.json").read_text())
        change(config)
        (copy / "config.json").write_text(json.dumps(config))

    return apply


FOUND = [  # cases the fuzzing above found, each a traceback before it was mended
    ("medusa", lambda copy: (copy / "config.json").write_bytes(b""), "JSONDecodeError"),
    ("medusa", lambda copy: (copy / "config.json").write_bytes(b"\x80"), "UnicodeDecodeError"),
    ("medusa", lambda copy: (copy / "config.json").write_bytes(b"[]"), "AttributeError"),
    ("eagle", with_config(lambda c: c.update(attention_bias=0)), "transformers' strict config field"),
    ("dflash", with_config(lambda c: c["rope_parameters"].update(rope_theta=None)), "TypeError, rotary"),
    ("dflash", with_config(lambda c: c.update(block_size="x" * 5000)), "a 5,000-character error line"),
    ("dflash", with_config(lambda c: c.update(head_dim=6749692)), "7 GB built before the shapes were checked"),
]


@pytest.mark.parametrize("kind, apply, was", FOUND, ids=[f"{k}-{w}" for k, _, w in FOUND])
def test_the_damage_the_fuzzing_found_fails_in_one_line(saved, kind, apply, was):
    target, folders = saved
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / kind
        shutil.copytree(folders[kind], copy)
        apply(copy)
        with pytest.raises(SpecvizError) as caught:
            LOADERS[kind](str(copy), target)
    assert "\n" not in str(caught.value) and len(str(caught.value)) <= 500
