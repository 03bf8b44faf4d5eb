"""Medusa: heads on the target's last hidden state guess the tokens after next, and a fixed tree of their top
guesses is verified in one forward (heads.py: the heads and their checkpoints; medusa_drafter.py: drafting).
specviz/training/medusa.py trains them by self-distillation."""

from ...serving.declaration import LlamaSpecType, Nearest, Serving, VllmMethod, Weights
from ..contract import Recipe
from ..heads_common import heads_for, kept_with_target, no_transformers, reads_insides
from ..listing import Listing
from ..options import Options, option
from .medusa_drafter import TREES, MedusaDrafter, medusa_tree


class MedusaOptions(Options):
    medusa: object = option(
        "",
        "Medusa heads",
        "heads folder or Hub id (official Medusa-1 layout or specviz's "
        "compact one); default: the heads shipped for an offline target",
        app=False,
        pair_model=True,
        published=(("lmsys/vicuna-7b-v1.3", "FasterDecoding/medusa-vicuna-7b-v1.3"),),  # Medusa-1, 5 heads
    )
    medusa_tree: str = option(
        "sparse",
        "candidate tree",
        "sparse (11 paths), chain (each head's top guess), wide "
        "(24 paths), or index paths as JSON, e.g. '[[0], [0, 0], [1]]'",
        choices=tuple(TREES),
        strict=False,
    )

    def check(self) -> None:
        medusa_tree(self.medusa_tree)


def _location(options: MedusaOptions, target_name: str):
    from .heads import shipped_heads

    return heads_for(
        options.medusa, shipped_heads(target_name), target_name, "Medusa heads", "--medusa", "train-medusa"
    )


def _build(options: MedusaOptions, ctx) -> MedusaDrafter:
    from .heads import MedusaHeads, load_medusa

    heads = options.medusa
    if not isinstance(heads, MedusaHeads):  # a location: loaded once per target and kept with it
        heads = kept_with_target(ctx, "medusa", _location(options, ctx.target.name), load_medusa)
    return MedusaDrafter(heads, medusa_tree(options.medusa_tree))


KIND = Recipe(
    "medusa",
    MedusaOptions,
    _build,
    Listing(
        "Medusa heads (tree)",
        "heads on the target's last hidden state guess the next tokens; a tree of their guesses is verified in one "
        "forward",
        describe=lambda o: f"Medusa heads, {o.medusa_tree} tree",
        order=40,
    ),
    **reads_insides("medusa", _location, "heads read the target's final hidden state at every position"),
    serving=Serving(
        transformers=no_transformers("Medusa heads"),
        vllm=VllmMethod(
            "medusa",
            weights=Weights(lambda o: o.medusa, "MEDUSA_HEADS"),
            note="also there: mtp, which drafts from a model's own multi-token prediction layers where it has them",
        ),
        sglang=Nearest("SGLang has no Medusa heads: an EAGLE head trained for the target is its nearest"),
        llama_cpp=Nearest(
            "llama.cpp has no Medusa heads; its nearest is draft-mtp, which drafts from a model's own multi-token "
            "prediction layers where it was trained with them (Medusa's heads are added to a model that was not)",
            of=Serving(llama_cpp=LlamaSpecType("draft-mtp")),
        ),
        tree=lambda o: o.medusa_tree != "chain",
    ),
)
