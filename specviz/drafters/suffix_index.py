"""Where did the end of the text occur before, and what followed it: the lookup that n-gram and suffix drafting share.

Texts are kept as documents: the run being generated (its prompt, then its output) and, through a RunMemory, earlier
runs. A document indexes its n-grams of 1..KEY_LENGTH tokens by the position right after them, extended as tokens
arrive; an n-gram enters the index only once a token follows it, so a match always leaves something to copy and never
covers the positions being predicted. A lookup finds candidates through the longest indexed n-gram of the text's end
and extends each backwards to its true match length (at most MATCH_CAP). The occurrences whose match is the longest
are what drafts are made from: the continuation of the best one (a chain), or a tree of the most frequent
continuations. No torch here.
"""

import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..events import EARLIER, OUTPUT, PROMPT

KEY_LENGTH = 4  # the longest n-gram indexed; longer matches are measured by extending candidates backwards
MATCH_CAP = 64  # longer matches count as this long (and tie)


class Document:
    """One run's tokens and the index of its n-grams: key (1..KEY_LENGTH tokens) -> the positions right after its
    occurrences, ascending."""

    def __init__(self, serial: int, prompt_length: int = 0):
        self.serial = serial  # documents begun later have larger serials: ties go to the most recent
        self.prompt_length = prompt_length
        self.tokens: list[int] = []
        self.ends: dict[tuple[int, ...], list[int]] = {}

    def extend(self, tokens: Sequence[int]) -> None:
        for token in tokens:
            end = len(self.tokens)  # the n-grams ending here are now followed by `token`
            for n in range(1, min(KEY_LENGTH, end) + 1):
                self.ends.setdefault(tuple(self.tokens[end - n : end]), []).append(end)
            self.tokens.append(token)

    def truncate(self, length: int) -> None:
        while len(self.tokens) > length:
            self.tokens.pop()
            end = len(self.tokens)
            for n in range(1, min(KEY_LENGTH, end) + 1):
                key = tuple(self.tokens[end - n : end])
                self.ends[key].pop()
                if not self.ends[key]:
                    del self.ends[key]

    def follow(self, tokens: Sequence[int]) -> None:
        """Become the text `tokens`: append what is new; a text that parts from this one keeps only the shared start."""
        known = len(self.tokens)
        if list(tokens[:known]) != self.tokens:
            shared = next((i for i, (a, b) in enumerate(zip(tokens, self.tokens)) if a != b), min(len(tokens), known))
            self.truncate(shared)
        self.extend(tokens[len(self.tokens) :])

    def origin(self, position: int) -> str:
        return PROMPT if position < self.prompt_length else OUTPUT


@dataclass(frozen=True)
class Occurrence:
    """An earlier place matching the text's end over `length` tokens; its continuation starts at `end`."""

    document: Document
    end: int
    length: int
    origin: str

    @property
    def recency(self) -> tuple[int, int]:
        return self.document.serial, self.end

    def continuation(self, depth: int) -> tuple[int, ...]:
        return tuple(self.document.tokens[self.end : self.end + depth])


def longest_match(own: Document, others: Sequence[Document] = (), shortest: int = 1) -> list[Occurrence]:
    """Every occurrence, earlier in `own` or anywhere in `others`, of the longest match of the end of own's text, if
    that match is at least `shortest` tokens long; else none."""
    text = own.tokens
    documents = [*others, own]
    key_length = next(
        (n for n in range(min(KEY_LENGTH, len(text)), 0, -1) if any(tuple(text[-n:]) in d.ends for d in documents)), 0
    )
    if key_length == 0:
        return []
    key = tuple(text[-key_length:])
    found = []
    for document in documents:
        for end in document.ends.get(key, ()):
            # below KEY_LENGTH a longer match would have shown up as a longer key: the key's length is the match's
            length = key_length if key_length < KEY_LENGTH else agreement(document.tokens, end, text, key_length)
            found.append(Occurrence(document, end, length, document.origin(end) if document is own else EARLIER))
    longest = max(o.length for o in found)
    return [o for o in found if o.length == longest] if longest >= shortest else []


def agreement(tokens: list[int], end: int, text: list[int], known: int) -> int:
    """How many tokens before `end` in `tokens` equal the end of `text` (at most MATCH_CAP), given `known` of them do.
    Compares whole slices, doubling the stretch, then halving it at the first mismatch."""
    limit = min(MATCH_CAP, end, len(text))
    size = len(text)
    good = known
    step = known
    while good < limit:
        trial = min(limit, good + step)
        if tokens[end - trial : end - good] == text[size - trial : size - good]:
            good = trial
            step = step * 2
            continue
        low, high = good, trial - 1  # they agree over `low`; the answer is in low..high
        while low < high:
            mid = (low + high + 1) // 2
            if tokens[end - mid : end - good] == text[size - mid : size - good]:
                low = mid
            else:
                high = mid - 1
        return low
    return good


def draft_depth(match_length: int, factor: float, cap: int) -> int:
    """A short match drafts little, a long copy deep: ceil(factor × match length), at most `cap`."""
    return min(cap, math.ceil(factor * match_length))


def best_chain(occurrences: Sequence[Occurrence], depth: int) -> tuple[tuple[int, ...], str]:
    """What followed the best occurrence (the longest match; among equals the most recent), and where it was."""
    best = max(occurrences, key=lambda o: (o.length, o.recency))
    return best.continuation(depth), best.origin


@dataclass(eq=False)
class _Node:
    """A prefix of the continuations, with the occurrences whose continuation starts with it."""

    path: tuple[int, ...]
    through: list[Occurrence]
    chosen: list["_Node"] = field(default_factory=list)  # children picked so far, in the order picked

    def rank(self) -> tuple:
        """Smaller is better: more occurrences, then shallower, then a more recent occurrence. A child never ranks
        before its parent (it has no more occurrences and is deeper); two nodes never rank the same."""
        serial, end = max(o.recency for o in self.through)
        return -len(self.through), len(self.path), -serial, -end

    def children(self, depth: int) -> list["_Node"]:
        if len(self.path) >= depth:
            return []
        groups: dict[int, list[Occurrence]] = {}
        for o in self.through:
            at = o.end + len(self.path)
            if at < len(o.document.tokens):
                groups.setdefault(o.document.tokens[at], []).append(o)
        return [_Node(self.path + (token,), through) for token, through in groups.items()]


def frequent_tree(
    occurrences: Sequence[Occurrence], depth: int, budget: int
) -> tuple[tuple[tuple[int, ...], ...], str]:
    """The `budget` most likely nodes of the trie of continuations (up to `depth` tokens each), a node's likelihood
    estimated as the share of occurrences continuing through it, picked best-first; returned as root-to-leaf
    candidates, the most likely child first at every level, with where the first candidate came from."""
    root = _Node((), list(occurrences))
    frontier = [(child.rank(), child, root) for child in root.children(depth)]
    heapq.heapify(frontier)
    for _ in range(budget):
        if not frontier:
            break
        _, node, parent = heapq.heappop(frontier)
        parent.chosen.append(node)
        for child in node.children(depth):
            heapq.heappush(frontier, (child.rank(), child, node))
    leaves = _leaves(root)
    if not leaves:
        return (), ""
    first = max(leaves[0].through, key=lambda o: o.recency)
    return tuple(leaf.path for leaf in leaves), first.origin


def _leaves(root: _Node) -> list[_Node]:
    leaves = []
    stack = list(reversed(root.chosen))
    while stack:
        node = stack.pop()
        if node.chosen:
            stack.extend(reversed(node.chosen))
        else:
            leaves.append(node)
    return leaves


class RunMemory:
    """Earlier runs to draft from, owned by a caller and handed to each generation: the `max_runs` most recent
    earlier runs are kept (the oldest evicted first), beside the run in progress, which is indexed as it grows."""

    def __init__(self, max_runs: int = 16, max_tokens: int | None = None):
        self.max_runs = max_runs
        self.max_tokens = max_tokens
        self.runs: deque[Document] = deque()
        self.begun = 0

    @property
    def tokens(self) -> int:
        """Tokens held, prompts included: what the memory's size grows with (its index keeps a few entries each)."""
        return sum(len(run.tokens) for run in self.runs)

    def copy(self) -> "RunMemory":
        """The same earlier runs for a run that must not change this memory: a run only ever adds a document of its
        own and drops the oldest from its copy's list, so the documents themselves are shared, not copied."""
        twin = RunMemory(self.max_runs, self.max_tokens)
        twin.runs = deque(self.runs)
        twin.begun = self.begun
        return twin

    def remember(self, prompt_ids: Sequence[int], output: Sequence[int]) -> None:
        """A finished run joins the memory; the oldest runs go while the memory holds more than max_tokens (the
        newest run always stays, cut to its last max_tokens tokens if it alone is longer)."""
        prompt = list(prompt_ids)
        output = list(output)
        cut = 0 if self.max_tokens is None else max(0, len(prompt) + len(output) - self.max_tokens)
        self.begin(prompt[cut:]).extend(output[max(0, cut - len(prompt)) :])
        while self.max_tokens is not None and len(self.runs) > 1 and self.tokens > self.max_tokens:
            self.runs.popleft()

    def begin(self, prompt_ids: Sequence[int]) -> Document:
        """A new run, starting with its prompt; it is the most recent from now on."""
        run = Document(self.begun, len(prompt_ids))
        run.extend(prompt_ids)
        self.begun += 1
        self.runs.append(run)
        while len(self.runs) > self.max_runs + 1:
            self.runs.popleft()
        return run

    def earlier(self, run: Document | None, limit: int) -> list[Document]:
        """The `limit` most recent runs kept other than `run`, oldest first."""
        others = [r for r in self.runs if r is not run]
        return others[max(0, len(others) - limit) :]
