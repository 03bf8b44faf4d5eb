"""What a training run is asked for, one dataclass per trainer: the command line fills each by field name (and takes
its defaults from here), the trainer reads it. No torch, so the command line can build its flags without it."""

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class MedusaTraining:
    """How `train_heads` trains Medusa heads: how many, how deep, and the schedule."""

    heads: int = 4  # head k predicts the token k + 2 positions ahead
    layers: int = 1  # ResBlocks per head
    steps: int = 300
    lr: float = 1e-3
    train_batch: int = 64  # rows per step
    held_out: float = 0.15  # share of the groups (prompts, files) kept apart to measure the accuracy
    seed: int = 0
    shortlist: int = 8192  # > 0: the heads score only that many ids (chosen from the training side only)


@dataclass(frozen=True)
class EagleTraining:
    """How `train_eagle` trains a head: its schedule, its windows, its shape and where it keeps its state."""

    steps: int = 400  # the total over all runs that go on from one checkpoint
    lr: float = 5e-4
    train_batch: int = 8  # windows per step
    window: int = 128  # pairs per training window
    unroll: int = 2  # extra passes that feed the head its own guesses
    shortlist: int = 8192  # how many token ids the head scores (0 = the whole vocabulary)
    held_out: float = 0.1  # share of the prompts, and of the files, kept apart to measure the acceptance
    seed: int = 0
    init: str = "pass-through"  # or "random": see _init_pass_through in training/eagle.py
    depth: int = 5  # how deep a chain the held-out acceptance measures
    intermediate_size: int = 0  # the layer's MLP width (0: the target's own)
    checkpoint: Path | None = None  # the whole training state, kept here; when it exists, training goes on from it
    save_every: int = 50  # steps between two writes of `checkpoint`
    until_step: int = 0  # > 0: this run stops after that step


@dataclass(frozen=True)
class DFlashTraining:
    """How `train_dflash` trains a drafter: the schedule and where it keeps its state."""

    steps: int = 400  # the total over all runs that go on from one checkpoint
    train_batch: int = 8  # blocks (anchor positions) per step
    anchors_per_text: int = 8  # of them from each text drawn, all scored in one pass
    shortlist: int = 32768  # > 0: the loss scores only the ids the training texts use most (drafting: every id)
    features: Path | None = None  # the target's features of the texts, kept here; when it exists, read from it
    lr: float = 1e-3
    decay: bool = True  # after the first tenth of the steps, the rate falls along a half cosine to a tenth of `lr`
    seed: int = 0
    checkpoint: Path | None = None  # the training state, kept here; when it exists, training goes on from it
    save_every: int = 50  # steps between two writes of `checkpoint`
    until_step: int = 0  # > 0: this run stops after that step
