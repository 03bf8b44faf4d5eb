"""Models: one loader for offline presets, local folders and Hub ids, and the offline presets themselves."""

from .loading import DTYPES, LoadedModel, encode_prompt, load_model, resolve_device

__all__ = ["DTYPES", "LoadedModel", "encode_prompt", "load_model", "resolve_device"]
