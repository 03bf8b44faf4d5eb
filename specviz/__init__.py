"""specviz: see speculative decoding work. Importing the package loads no torch; the engine does."""

__version__ = "0.1.0"
