"""Shared paths and process setup, for the CLI, the app and the benchmark alike."""

from pathlib import Path

# Prompts, shipped heads, model configs, the stylesheet: inside an installed package, else at the checkout's top.
_HERE = Path(__file__).resolve().parent
ASSETS = _HERE / "assets" if (_HERE / "assets").is_dir() else _HERE.parent / "assets"


def quiet_transformers() -> None:
    """No progress bars or advice from transformers: the CLI prints one line per error, the app its own status."""
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()
