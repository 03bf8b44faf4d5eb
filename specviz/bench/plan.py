"""The benchmark's plan: drafters, options, γ values, temperatures, acceptance rates, prompts and draft models, made
from the flags before any model loads (specviz/cli/bench.py), and the parsers and prompt tables it is made with."""

import json
from dataclasses import dataclass

from ..drafters.contract import Recipe
from ..errors import InvalidRequest
from ..paths import ASSETS
from ..settings import Settings

CONTEXT = "context-"  # a kind "context-N": one prompt of about N tokens, for the sweep over prompt length
WORDS_PER_TOKEN = 0.75  # English prose in the Qwen and SmolLM2 tokenizers, near enough to aim at a length


@dataclass(frozen=True)
class DraftModel:
    """A draft model at one precision: the drafters that need a draft model run once with each."""

    name: str
    precision: str


@dataclass(frozen=True)
class Plan:
    """The flags, checked before any model loads."""

    methods: list[Recipe]
    options: dict  # drafter name -> its Options
    gammas: list[int]
    temperatures: list[float]
    alphas: list[float]  # the acceptance rates a set-α measuring tool runs at
    prompts: list[tuple[str, object]]  # (prompt kind, prompt)
    drafts: list[DraftModel]

    def shards(self) -> list["Shard"]:
        """The prompts by kind, each kind's in file order: the unit a cluster's actor runs whole, since a drafter that
        drafts from earlier runs reads its kind's earlier prompts."""
        by_kind: dict[str, list] = {}
        for kind, prompt in self.prompts:
            by_kind.setdefault(kind, []).append(prompt)
        return [Shard(kind, tuple(prompts)) for kind, prompts in by_kind.items()]


@dataclass(frozen=True)
class Shard:
    """One prompt kind's prompts, run in order (a prompt's run index is its place here)."""

    kind: str
    prompts: tuple


def parse_gammas(text: str) -> list[int]:
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-"))
            gammas = list(range(lo, hi + 1))
        else:
            gammas = [int(x) for x in text.split(",")]
    except ValueError:
        raise InvalidRequest(f"--gammas must look like 1-8 or 2,4,6, got {text!r}") from None
    for g in gammas:
        Settings(gamma=g)  # same range check as everywhere else
    if not gammas:
        raise InvalidRequest("--gammas selects nothing")
    return gammas


def parse_numbers(text: str, flag: str, example: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise InvalidRequest(f"{flag} must look like {example}, got {text!r}") from None


def load_prompts(kinds_: list[str], per_kind: int) -> list[tuple[str, object]]:
    """(kind, prompt) pairs; a prompt is a text or, for chat, a list of messages ending with the user's turn."""
    table = json.loads((ASSETS / "prompts.json").read_text())
    unknown = [k for k in kinds_ if k not in table and not _context_length(k)]
    if unknown:
        raise InvalidRequest(
            f"unknown prompt kind {unknown[0]!r}; kinds: {', '.join(table)}, or {CONTEXT}N (a prompt of about N tokens)"
        )
    return [
        (k, context_prompt(table, _context_length(k))) if _context_length(k) else (k, prompt)
        for k in kinds_
        for prompt in table.get(k, [None])[:per_kind]
    ]


def _context_length(kind: str) -> int:
    tail = kind[len(CONTEXT) :] if kind.startswith(CONTEXT) else ""
    return int(tail) if tail.isdigit() and int(tail) > 0 else 0


def context_prompt(table: dict, tokens: int) -> str:
    """About `tokens` tokens of the shipped articles and passages, then a request to continue them: decoding then
    attends over a context of that length, as after a long document or a long chat."""
    source = " ".join(p for kind in ("summarization", "rag") for p in table[kind]).split()
    words = max(1, round(tokens * WORDS_PER_TOKEN) - 30)  # the chat template and the request take ~40 tokens
    text = " ".join((source * (words // len(source) + 1))[:words])
    return f"{text}\n\nContinue the text above with one more paragraph in the same style."


def prompt_label(prompt) -> str:
    return (prompt if isinstance(prompt, str) else f"[{len(prompt)} turns] " + prompt[-1]["content"])[:60]
