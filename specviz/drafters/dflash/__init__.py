"""DFlash: a small block-diffusion drafter reads the target's hidden states from a few of its layers and fills a
whole block of tokens in one pass (model.py: the draft layers; dflash_drafter.py: drafting; dflash_checkpoint.py:
the published layout read strictly, and specviz's own). specviz/training/dflash.py trains one on a CPU from the
target's own continuations."""

from ...serving.declaration import LlamaSpecType, Serving, SglangAlgorithm, VllmMethod, Weights
from ..contract import Recipe
from ..heads_common import heads_for, kept_with_target, no_transformers, reads_insides, tree_nodes
from ..listing import Listing
from ..options import Options, option

TREES = ("chain", "tree")
NODES = 16  # the most draft tokens a DFlash tree sends to verification, unless asked otherwise


class DFlashOptions(Options):
    dflash: object = option(
        "",
        "DFlash drafter",
        "DFlash drafter folder or Hub id (the published layout); default: the drafter shipped for an offline target",
        pair_model=True,
        published=(
            ("Qwen/Qwen3-4B", "z-lab/Qwen3-4B-DFlash-b16"),  # z-lab's DFlash collection, block 16, thinking off
            ("Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16"),
        ),
        app=False,
    )
    dflash_tree: str = option(
        "chain",
        "DFlash tree",
        "chain (the block's best token at each position) or tree (from the same one pass, a best-first tree of the "
        "block's likeliest continuations, verified in one forward)",
        choices=TREES,
    )
    dflash_nodes: int = tree_nodes(NODES, "DFlash tree nodes", "a DFlash tree")


def _location(options: DFlashOptions, target_name: str):
    from .dflash_checkpoint import shipped_dflash

    return heads_for(
        options.dflash, shipped_dflash(target_name), target_name, "DFlash drafter", "--dflash", "train-dflash"
    )


def _build(options: DFlashOptions, ctx):
    from .dflash_drafter import DFlashDrafter
    from .model import DFlashDraft

    draft = options.dflash
    if not isinstance(draft, DFlashDraft):  # a location: loaded once per target and kept with it
        from .dflash_checkpoint import load_dflash

        draft = kept_with_target(ctx, "dflash", _location(options, ctx.target.name), load_dflash)
    return DFlashDrafter(draft, options.dflash_tree, options.dflash_nodes)


# What the field added since, beside DFlash in the engines that have both: the same block drafting, each position's
# logits biased by a low-rank term on the token before it.
DSPARK = (
    "also there: DSpark (vLLM's dspark, llama.cpp's draft-dspark) drafts a block the same way with a Markov head over "
    "the previous token, from a DSpark checkpoint for the target"
)

KIND = Recipe(
    "dflash",
    DFlashOptions,
    _build,
    Listing(
        "DFlash (block drafting)",
        "a few draft layers read the target's hidden states and fill a whole block of tokens in one pass",
        describe=lambda o: (
            "DFlash block drafter"
            + (f", a tree of {o.dflash_nodes} nodes from one pass" if o.dflash_tree == "tree" else "")
        ),
        order=47,
        preferred=(("gamma", 15), ("adaptive", True)),
    ),
    **reads_insides("dflash", _location, "draft reads several of the target's inner layers"),
    serving=Serving(
        transformers=no_transformers("DFlash block drafter"),
        vllm=VllmMethod(
            "dflash", weights=Weights(lambda o: o.dflash, "DFLASH_DRAFT"), adaptive_verification=True, note=DSPARK
        ),
        sglang=SglangAlgorithm("DFLASH", weights=Weights(lambda o: o.dflash, "DFLASH_DRAFT"), block=True),
        llama_cpp=LlamaSpecType("draft-dflash", weights=Weights(lambda o: o.dflash, "DFLASH_DRAFT.gguf"), note=DSPARK),
        tree=lambda o: o.dflash_tree != "chain",
    ),
)
