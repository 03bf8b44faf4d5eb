"""The metrics tables every panel draws: a header row of titles (each with its tip on hover), rows of text cells, and
the table around them. Callers hand over text, which is escaped here; a cell of markup is the caller's own."""

from collections.abc import Iterable, Mapping
from html import escape


def header(titles: Iterable[str], tips: Mapping[str, str] | None = None) -> str:
    """One row of column titles; a title that has a tip shows it on hover."""
    tips = tips or {}
    tip = lambda t: f' title="{escape(tips[t])}"' if t in tips else ""  # noqa: E731
    return "<tr>" + "".join(f"<th{tip(t)}>{escape(t)}</th>" for t in titles) + "</tr>"


def row(cells: Iterable[str], css: str = "", title: str = "") -> str:
    """One row of text cells; `css` and `title` mark the row (a tint, the reason on hover)."""
    marks = (f' class="{escape(css)}"' if css else "") + (f' title="{escape(title)}"' if title else "")
    return f"<tr{marks}>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>"


def table(css: str, titles: Iterable[str], rows: Iterable[str], tips: Mapping[str, str] | None = None) -> str:
    """A metrics table of class `css` (beside sv-metrics): the header, then the rows as made by `row`."""
    return (
        f'<table class="{escape(f"sv-metrics {css}".strip())}"><thead>{header(titles, tips)}</thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
