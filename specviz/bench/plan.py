"""The benchmark's plan: its flags checked and turned into drafters, options, γ values, temperatures, acceptance
rates, prompts and draft models before any model loads."""

import json
import sys
from dataclasses import dataclass

from ..drafters.kinds import DrafterKind
from ..drafters.registry import kinds
from ..errors import InvalidRequest, SpecvizError
from ..flags import PRECISIONS, given_options
from ..runtime import ASSETS
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

    methods: list[DrafterKind]
    options: dict  # drafter name -> its Options
    gammas: list[int]
    temperatures: list[float]
    alphas: list[float]  # the acceptance rates a set-α measuring tool runs at
    prompts: list[tuple[str, object]]  # (prompt kind, prompt)
    drafts: list[DraftModel]


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


def plan_from(args) -> Plan:
    by_name = {k.name: k for k in kinds()}
    named = bool(args.methods.strip())
    names = [m.strip() for m in args.methods.split(",") if m.strip()] if named else list(by_name)
    if not names or any(m not in by_name for m in names):
        raise InvalidRequest(f"--methods must be some of {','.join(by_name)}, got {args.methods!r}")
    gammas = parse_gammas(args.gammas)
    temperatures = parse_numbers(args.temperatures, "--temperatures", "0,0.7")
    alphas = parse_numbers(args.oracle_alphas, "--oracle-alphas", "0.5,0.8")
    if any(not 0 <= a <= 1 for a in alphas):
        raise InvalidRequest(f"--oracle-alphas must be rates in [0, 1], got {args.oracle_alphas!r}")
    if args.repeats < 1:
        raise InvalidRequest(f"--repeats must be at least 1, got {args.repeats}")
    for t in temperatures:
        Settings(temperature=t, max_new_tokens=args.max_new_tokens)
    prompts = load_prompts([k.strip() for k in args.kinds.split(",")], args.prompts_per_kind)
    given = given_options(args)
    methods = [by_name[m] for m in names]
    options = {k.name: k.parse({**dict(k.preferred), **given.get(k.name, {})}) for k in methods}  # as the CLI runs them
    for k in list(methods):
        try:
            k.check_for(options[k.name], args.target)  # e.g. Medusa heads for this target, before any model loads
        except SpecvizError as exc:
            if named:
                raise
            methods.remove(k)  # not asked for by name: left out, and said so
            print(f"{k.name}: left out: {exc}", file=sys.stderr, flush=True)
    draft_dtypes = [d.strip() for d in (args.draft_dtype or args.dtype).split(",") if d.strip()]
    if not draft_dtypes or any(d not in PRECISIONS for d in draft_dtypes):
        raise InvalidRequest(f"--draft-dtype must be some of {','.join(PRECISIONS)}, got {args.draft_dtype!r}")
    drafts = [DraftModel(name.strip(), d) for name in args.draft.split(",") if name.strip() for d in draft_dtypes]
    return Plan(methods, options, gammas, temperatures, alphas, prompts, drafts)
