"""Where specviz's files are: the prompts, the shipped heads, the model configs and the stylesheets."""

from pathlib import Path

# Inside an installed package they sit beside the code, else at the checkout's top.
_HERE = Path(__file__).resolve().parent
ASSETS = _HERE / "assets" if (_HERE / "assets").is_dir() else _HERE.parent / "assets"
