"""What weights read beside a frozen target share (Medusa and EAGLE heads, a DFlash drafter): where their folder
comes from (shipped, local or the Hub), how they load once per target, the checks on what it names, and the
vocabulary shortlist that lets heads score only some rows of the LM head. Each kind names its own files, words and
error class."""

import json
from pathlib import Path

import torch

from ..errors import InvalidRequest, first_line
from ..models.loading import hub_offline, hub_unreachable_reason, linear_weight, looks_like_hub_id
from ..serving.declaration import Nearest
from .options import option

SHORTLIST_FILE = "head_vocab.json"  # a JSON list of the token ids the heads score
# why weights that read the target's hidden states do not decode concurrent requests together yet
READS_HIDDEN = "it reads the target's hidden states, which a batch's cache does not keep yet"


def reads_insides(kind: str, location, reads: str) -> dict:
    """The Recipe fields shared by the drafters that read the target's insides: the weights' location checked before
    any load, no batched lanes (READS_HIDDEN), and what it reads (a runtime that gives no hidden states refuses it)."""
    return {"precheck": location_check(kind, location), "unbatched": READS_HIDDEN, "reads": reads}


def tree_nodes(default: int, label: str, tree: str):
    """The option of how big a tree drafted from the target's insides may grow, in one range for every such kind."""
    return option(
        default,
        label,
        f"the most draft tokens {tree} sends to verification (a CPU pays for each one; a GPU verifies 32-64 "
        "nearly free)",
        low=2,
        high=64,
    )


def no_transformers(what: str) -> Nearest:
    """transformers' generate has no such drafter: plain decoding stands in."""
    return Nearest(f"transformers' generate has no {what}", plain=True)


def shipped_folder(root: Path, base_name: str) -> Path | None:
    """The heads folder specviz ships under `root` for an offline preset, if any."""
    name = str(base_name)
    if not name or "/" in name or "\\" in name or name.startswith("."):  # a path or Hub id is not a preset name
        return None
    folder = root / name
    return folder if (folder / "config.json").is_file() else None


def heads_for(given, shipped: Path | None, target_name: str, what: str, flag: str, trainer: str):
    """The heads location asked for, else the shipped one; neither: one line saying how to get some."""
    where = given or shipped
    if not where:
        raise InvalidRequest(
            f"no {what} for '{target_name}': none ship with specviz for it; give one "
            f"({flag} FOLDER_OR_HUB_ID, or a pair that brings one) or train one with {trainer}"
        )
    return where


def kept_with_target(ctx, kind: str, where, load):
    """The weights at `where`, read by `load(where, target)` once per target and location and kept with the target."""
    return ctx.target.companion((kind, str(where)), lambda: load(where, ctx.target))


def location_check(field: str, locate):
    """A kind's precheck: weights named by a location (the option `field`, as text) are found by `locate(options,
    target_name)` before any model loads, so a wrong folder or Hub id fails in one line; weights already loaded (as
    tests pass them) need no check."""

    def precheck(options, target_name: str) -> None:
        if isinstance(getattr(options, field), str):
            locate(options, target_name)

    return precheck


def locate_heads(spec, patterns: list[str], what: str, error: type[Exception]) -> Path:
    """A local folder, or a Hub repo id (owner/name) whose `patterns` are fetched; with the Hub off or unreachable
    (checked the way models are), only the local cache can serve it. Failures are one line of `error`."""

    folder = Path(str(spec)).expanduser()
    if folder.exists() or not looks_like_hub_id(str(spec)):
        return folder
    cache_only = hub_offline() or hub_unreachable_reason() is not None
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(str(spec), allow_patterns=patterns, local_files_only=cache_only))
    except Exception as exc:  # offline, no such repo, ...: one line
        where = "the local cache (the Hub is not reachable)" if cache_only else "the Hub"
        raise error(f"cannot fetch {what} '{spec}' from {where}: {first_line(exc)[:200]}") from exc


def read_config(folder: Path, what: str, error: type[Exception]) -> dict:
    """A checkpoint's config.json as a JSON object; missing, unreadable or another kind of JSON: one line of `error`."""
    path = folder / "config.json"
    if not path.is_file():
        raise error(f"'{folder}' is not {what} checkpoint (no config.json)")
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError):
        saved = None
    if not isinstance(saved, dict):
        raise error(f"{path} is not a JSON object")
    return saved


def built(make, what: str, error: type[Exception]):
    """`make()`, the module a checkpoint's config describes; a config transformers or torch cannot build from (a
    field of the wrong kind, a size that cannot be) is one line of `error`, not their traceback."""
    try:
        return make()
    except error:
        raise
    except Exception as exc:
        raise error(
            f"the config.json of {what} cannot be built ({type(exc).__name__}: {first_line(exc)[:160]})"
        ) from None


def meta_shapes(make, what: str, error: type[Exception]) -> dict:
    """The state dict of `make()` built on the meta device (through `built`): the shapes its config describes, with
    no memory spent on them, for `check_weights` to hold the weights to before the module is built for real (a
    damaged config's sizes can ask for gigabytes)."""
    with torch.device("meta"):
        return built(make, what, error).state_dict()


def check_base(config: dict, target_name: str, what: str, error: type[Exception]) -> None:
    """Heads whose config names another base model than the target are refused (a config naming none passes)."""
    named = str(config.get("base_model_name_or_path", "")).rstrip("/").split("/")[-1].lower()
    if named and named != str(target_name).rstrip("/").split("/")[-1].lower():
        raise error(f"these {what} were trained for '{config['base_model_name_or_path']}', not '{target_name}'")


def read_shortlist(folder: Path, vocab: int, error: type[Exception]) -> torch.Tensor | None:
    path = folder / SHORTLIST_FILE
    if not path.is_file():
        return None
    try:
        ids = json.loads(path.read_text())
        ok = isinstance(ids, list) and ids and all(isinstance(i, int) and 0 <= i < vocab for i in ids)
    except ValueError:
        ok = False
    if not ok:
        raise error(f"{path} must be a non-empty JSON list of token ids below {vocab}")
    return torch.tensor(ids)


def write_shortlist(folder: Path, shortlist: torch.Tensor | None) -> None:
    if shortlist is not None:
        (folder / SHORTLIST_FILE).write_text(json.dumps(shortlist.tolist()) + "\n")


def register_shortlist(
    module: torch.nn.Module, lm_head: torch.nn.Module | None, shortlist: torch.Tensor | None
) -> None:
    """`module.shortlist` (the ids, or None) and `module.rows`, their rows of the LM head: buffers, so .to() moves
    them with the heads, kept out of the state dict (the shortlist has its own file)."""
    module.register_buffer("shortlist", None if shortlist is None else shortlist.long(), persistent=False)
    if shortlist is not None:
        module.register_buffer("rows", linear_weight(lm_head).detach()[module.shortlist].clone(), persistent=False)


def check_weights(
    state: dict, expected: dict, error: type[Exception], mismatch: str, weight: str, owner: str, detail: str = ""
) -> None:
    """Refuse in one line weights whose names or shapes are not the module's: `mismatch` begins the names' line
    ("EAGLE weights (eagle3) do not fit"), `weight` names one tensor ("EAGLE weight"), `owner` is who needs the
    shape ("target 'x'"), `detail` what follows it."""
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        raise error(f"{mismatch}: missing {missing[:3]}, unexpected {extra[:3]}")
    for key, tensor in state.items():
        if tuple(tensor.shape) != tuple(expected[key].shape):
            shape = tuple(tensor.shape)
            needed = tuple(expected[key].shape)
            raise error(f"{weight} {key} has shape {shape}; {owner} needs {needed}{detail}")


def write_checkpoint(folder, config: dict, state: dict, weights: str, dtype: torch.dtype | None = None) -> Path:
    """config.json and a safetensors file of `state` in `folder` (made if needed), the floating tensors in `dtype`
    when given (the others, such as an index map, as they are)."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    cast = {k: v.detach().to(dtype if dtype and v.is_floating_point() else v.dtype) for k, v in state.items()}
    save_file({k: v.contiguous().cpu() for k, v in cast.items()}, str(folder / weights))
    return folder
