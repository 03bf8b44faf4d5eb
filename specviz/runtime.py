"""Shared paths and process setup, for the CLI, the app and the benchmark alike."""

from pathlib import Path

ASSETS = Path(__file__).resolve().parent.parent / "assets"  # prompts, shipped heads, model configs, stylesheet


def quiet_transformers() -> None:
    """No progress bars or advice from transformers: the CLI prints one line per error, the app its own status."""
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()
