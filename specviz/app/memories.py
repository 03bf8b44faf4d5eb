"""Each visitor's earlier runs, kept for the drafters that copy from them, and bounded.

A run's rejected drafts are on screen, so one visitor's runs must never be drafted from in another's session: each
session has its own memory. Memories are bounded in tokens (about 800 bytes each with their index, measured): a
visitor keeps at most VISITOR_TOKENS, all visitors together TOTAL_TOKENS (~400 MiB at worst); past either, the oldest
runs and then the least recently active visitors are forgotten."""

import threading
from collections import OrderedDict

from ..drafters.suffix_index import RunMemory

SESSIONS_REMEMBERED = 64
RUNS_REMEMBERED = 64  # earlier runs kept per visitor
VISITOR_TOKENS = 32_768
TOTAL_TOKENS = 524_288


class VisitorMemories:
    """Every visitor's RunMemory, least recently active first."""

    def __init__(self):
        self._lock = threading.Lock()
        self._held: OrderedDict[str, RunMemory] = OrderedDict()

    def __len__(self) -> int:
        return len(self._held)

    def items(self) -> list[tuple[str, RunMemory]]:
        """(session, its memory) for every visitor, least recently active first."""
        with self._lock:
            return list(self._held.items())

    def tokens(self) -> int:
        """What every visitor's memory holds together, in tokens."""
        with self._lock:
            return sum(m.tokens for m in self._held.values())

    def of(self, session: str) -> RunMemory:
        """This visitor's earlier runs (made on first use; the least recently active visitor's are dropped)."""
        with self._lock:
            found = self._held.pop(session, None) or RunMemory(RUNS_REMEMBERED, VISITOR_TOKENS)
            self._held[session] = found
            while len(self._held) > SESSIONS_REMEMBERED:
                self._held.popitem(last=False)
            return found

    def remember(self, session: str, prompt_ids: list[int], output: list[int]) -> None:
        """A visitor's finished (or stopped) run joins their memory; past TOTAL_TOKENS in all, the least recently
        active other visitors' memories go."""
        memory = self.of(session)
        memory.remember(prompt_ids, output)
        with self._lock:
            total = sum(m.tokens for m in self._held.values())
            for other in [s for s in self._held if s != session]:  # least recently active first
                if total <= TOTAL_TOKENS:
                    break
                total -= self._held.pop(other).tokens

    def forget(self, session: str) -> str:
        """The visitor left: drop their earlier runs. What the others' memories still hold, in words (for the log)."""
        with self._lock:
            self._held.pop(session, None)
            held = sum(m.tokens for m in self._held.values())
            others = len(self._held)
            return f"a visitor left (session {session[:8]}); {others} visitors' earlier runs hold {held} tokens"
