"""Models: what a loaded model is, transformers' one loader for presets, folders and Hub ids, the offline presets, and
what the transformers runtime measures and installs on its models (precision, exact mode, int8)."""

from .loading import DTYPES, LoadedModel, encode_prompt, resolve_device

__all__ = ["DTYPES", "LoadedModel", "encode_prompt", "resolve_device"]
