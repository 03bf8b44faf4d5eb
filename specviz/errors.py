"""Typed errors: everything a user can get wrong raises a SpecvizError with a one-line message."""

LONGEST_MESSAGE = 500  # characters: a message that quotes what the user gave quotes at most this much of it


class SpecvizError(Exception):
    """Base class: the message is one line a user can act on. However it was built (quoting a user's 100,000-character
    value, or text with line breaks in it), it reads as one line of at most LONGEST_MESSAGE characters."""

    def __str__(self) -> str:
        text = super().__str__().replace("\r", " ").replace("\n", " ")
        return text if len(text) <= LONGEST_MESSAGE else text[: LONGEST_MESSAGE - 1] + "…"


def first_line(exc: BaseException) -> str:
    """An exception's first non-blank words, or its type's name when it has none: what a one-line error quotes."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class InvalidRequest(SpecvizError, ValueError):
    """A generation setting or prompt is out of range."""


class InvalidEvent(SpecvizError, ValueError):
    """A step event whose counts do not hold together: a damaged trace, or a drafter that broke the contract."""


class ModelNotFound(SpecvizError):
    """The model name is not a preset, not a model folder, and cannot come from the Hub."""


class ModelLoadError(SpecvizError):
    """The model exists but could not be loaded (broken folder, Hub unreachable, ...)."""


class OfflinePackageError(SpecvizError):
    """An offline model package is missing or its data fails the checksum."""


class VocabularyMismatch(SpecvizError):
    """Target and draft spell no ordinary token the same way, so the draft's guesses cannot be bridged."""


class TreeAttentionUnsupported(SpecvizError):
    """The target model refuses a custom 4D attention mask, so it cannot verify a token tree."""


class CacheLayoutChanged(SpecvizError):
    """The installed transformers keeps its KV cache in other fields than specviz reads, so rollback and compaction
    would silently move the wrong entries."""


class CustomMaskUnsupported(SpecvizError):
    """The model's attention implementation ignores or rejects a custom 4D attention mask."""


class LlamaCppMissing(SpecvizError):
    """The llama.cpp runtime was asked for, but llama-cpp-python is not installed (or its library does not load)."""


class RuntimeUnsupported(SpecvizError, ValueError):
    """What a run asks for is not something the chosen runtime can do (a head that reads hidden states llama.cpp
    does not expose, a precision only transformers has)."""
