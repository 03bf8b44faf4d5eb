"""Where specviz's files are: the prompts, the shipped heads, the model configs and the stylesheets; and which modules
of a package declare something (how the registries find the drafter kinds and the runtimes)."""

import importlib
import pkgutil
from pathlib import Path

# Inside an installed package they sit beside the code, else at the checkout's top.
_HERE = Path(__file__).resolve().parent
ASSETS = _HERE / "assets" if (_HERE / "assets").is_dir() else _HERE.parent / "assets"


def declared_in(package: str, folders: tuple[str, ...], attribute: str, kind: type, skip=(), reserved="") -> dict:
    """Every `kind` a module (or subpackage) of `package`, found in `folders`, declares as `attribute`, by its `name`;
    a name declared twice, or the `reserved` one, is a RuntimeError."""
    found = {}
    for module in pkgutil.iter_modules(list(folders)):
        if module.name.startswith("_") or module.name in skip:
            continue
        one = getattr(importlib.import_module(f"{package}.{module.name}"), attribute, None)
        if not isinstance(one, kind):
            continue
        if one.name in found or one.name == reserved:
            raise RuntimeError(f"{attribute} name {one.name!r} is declared twice (or is reserved)")
        found[one.name] = one
    return found
