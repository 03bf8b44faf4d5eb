"""Command-line flags that `generate` and `bench` share: the model's precision and device, and every option any
drafter declares (one flag per option, read from the registry), with the check that an option meets its drafter."""

import argparse

from .errors import InvalidRequest

PRECISIONS = ("bfloat16", "float32", "int8")  # int8: dynamic int8 Linear layers, CPU


def add_model_options(p: argparse.ArgumentParser, several_drafts: bool = False) -> None:
    p.add_argument(
        "--dtype",
        default="bfloat16",
        choices=list(PRECISIONS),
        help="the target's precision (and the draft's, unless --draft-dtype): bf16 is ~2x faster than "
        "float32 on a CPU, exact checks use float32; int8 (CPU) is an int8 target, another model",
    )
    p.add_argument(
        "--draft-dtype",
        choices=None if several_drafts else list(PRECISIONS),
        help="the draft model's precision (default: "
        + ("--dtype" if several_drafts else "int8 on a CPU, where it measured fastest, else --dtype")
        + "); an int8 draft costs less per token, and the "
        "target alone still decides the output"
        + ("; several, comma-separated, run the draft model at each" if several_drafts else ""),
    )
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])


def add_option_flags(p: argparse.ArgumentParser) -> None:
    """One flag per drafter option (unset: the drafter's default)."""
    from .drafters.registry import option_owners

    for takers, spec in option_owners():
        if spec.cli:
            p.add_argument(
                spec.cli_flag,
                dest=spec.name,
                default=None,
                type=int if spec.integer else str,
                choices=list(spec.choices) if spec.choices and spec.strict else None,
                help=f"{', '.join(k.name for k in takers)}: {spec.help} (default {spec.default!r})",
            )


def given_options(args, only: set[str] | None = None) -> dict[str, dict]:
    """{drafter name: {option: value}} for the option flags that were given. With `only`, an option of a drafter
    outside it is an error naming the drafter it belongs to."""
    from .drafters.registry import option_owners

    given: dict[str, dict] = {}
    for takers, spec in option_owners():
        value = getattr(args, spec.name, None)
        if value is None:
            continue
        names = [k.name for k in takers]
        if only is not None and not only & set(names):
            raise InvalidRequest(
                f"{spec.cli_flag} is only used by --drafter {' or '.join(names)}, not {' or '.join(sorted(only))}"
            )
        for name in names:
            given.setdefault(name, {})[spec.name] = value
    return given
