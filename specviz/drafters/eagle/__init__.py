"""EAGLE: a one-layer head drafts at the feature level from the target's own hidden states, as a chain or as
EAGLE-2's dynamic tree (head.py: the head; eagle_drafter.py: drafting; eagle_checkpoint.py: the published layouts
and specviz's own). specviz/training/eagle.py trains one by self-distillation on a CPU."""

from ...serving.declaration import LlamaSpecType, Serving, SglangAlgorithm, VllmMethod, Weights
from ..contract import Recipe
from ..heads_common import heads_for, kept_with_target, no_transformers, reads_insides, tree_nodes
from ..listing import Listing
from ..options import Options, option

TREES = ("dynamic", "chain")
NODES = 6  # the most draft tokens a dynamic tree sends to verification, unless asked otherwise


class EagleOptions(Options):
    eagle: object = option(
        "",
        "EAGLE heads",
        "heads folder or Hub id (EAGLE-1/2 or EAGLE-3 layout, or specviz's "
        "own); default: the heads shipped for an offline target",
        pair_model=True,
        published=(
            ("lmsys/vicuna-7b-v1.3", "yuhuili/EAGLE-Vicuna-7B-v1.3"),  # its EAGLE head
            ("Qwen/Qwen3-4B", "AngelSlim/Qwen3-4B_eagle3"),  # an EAGLE-3 head, Tencent's AngelSlim collection
        ),
        app=False,
    )
    eagle_tree: str = option(
        "dynamic",
        "EAGLE tree",
        "dynamic (EAGLE-2: grow the most confident branches, keep the "
        "best nodes) or chain (the head's top guess at each depth)",
        choices=TREES,
    )
    eagle_nodes: int = tree_nodes(NODES, "EAGLE tree nodes", "a dynamic tree")


def _location(options: EagleOptions, target_name: str):
    from .eagle_checkpoint import shipped_eagle

    return heads_for(options.eagle, shipped_eagle(target_name), target_name, "EAGLE heads", "--eagle", "train-eagle")


def _build(options: EagleOptions, ctx):
    from .eagle_checkpoint import load_eagle
    from .eagle_drafter import EagleDrafter
    from .head import EagleHead

    if isinstance(options.eagle, tuple):  # (head, hidden layers) already loaded, as tests pass them
        head, layers = options.eagle
    elif isinstance(options.eagle, EagleHead):
        head = options.eagle
        layers = (-1,)
    else:  # a location: loaded once per target and kept with it
        head, layers = kept_with_target(ctx, "eagle", _location(options, ctx.target.name), load_eagle)
    return EagleDrafter(head, layers, options.eagle_tree, options.eagle_nodes)


HEAD = Weights(lambda o: o.eagle, "EAGLE_HEAD")  # its `eagle` option, where vLLM and SGLang load it

KIND = Recipe(
    "eagle",
    EagleOptions,
    _build,
    Listing(
        "EAGLE head (dynamic tree)",
        "a one-layer head predicts the target's next hidden state "
        "from its last one; the target's own LM head turns it into tokens, grown into a tree",
        describe=lambda o: (
            f"EAGLE head, {o.eagle_tree} tree" + (f" of {o.eagle_nodes} nodes" if o.eagle_tree == "dynamic" else "")
        ),
        order=45,
    ),
    **reads_insides("eagle", _location, "head reads the target's hidden states from inside the model"),
    serving=Serving(
        transformers=no_transformers("EAGLE heads"),
        vllm=VllmMethod("eagle", weights=HEAD, adaptive_verification=True),
        sglang=SglangAlgorithm("EAGLE", weights=HEAD),
        llama_cpp=LlamaSpecType(
            "draft-eagle3",
            weights=Weights(lambda o: o.eagle, "EAGLE3_HEAD.gguf"),
            note="llama.cpp runs EAGLE-3 heads converted to GGUF (convert_hf_to_gguf.py --target-model-dir); an "
            "EAGLE-1 or -2 head has no llama.cpp type",
        ),
        tree=lambda o: o.eagle_tree != "chain",
    ),
)
