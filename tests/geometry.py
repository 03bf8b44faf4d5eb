"""Boxes of what a page shows, read in the browser, and the relations the stage tests ask of them: two parts must not
intersect, a part must lie inside another. A box is what getBoundingClientRect says (CSS pixels, viewport-relative), so
an SVG text clipped by its chart still has its whole box, and a box outside its frame means that part is cut."""

from dataclasses import dataclass
from itertools import combinations

SLACK = 1.0  # px: antialiasing and rounding at a shared edge are no overlap

# Every element under `root` (the document when null) that each selector names, as boxes; hidden ones (no width or
# no height) are left out. scroll/client widths tell whether an HTML element's content is wider than its box.
BOXES_JS = """([root, parts]) => {
  const scope = root ? document.querySelector(root) : document;
  const found = {};
  for (const [name, selector] of Object.entries(parts)) {
    found[name] = [...(scope ? scope.querySelectorAll(selector) : [])].map((e) => {
      const b = e.getBoundingClientRect();
      return {x: b.x, y: b.y, width: b.width, height: b.height, label: (e.textContent || '').trim().slice(0, 40),
              scroll_width: e.scrollWidth || 0, client_width: e.clientWidth || 0};
    }).filter((b) => b.width > 0 && b.height > 0);
  }
  return found;
}"""


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    width: float
    height: float
    label: str = ""
    scroll_width: float = 0
    client_width: float = 0

    @property
    def right(self) -> float:
        return self.x + self.width

    @property
    def bottom(self) -> float:
        return self.y + self.height

    def cut(self) -> bool:
        """An HTML element whose content is wider than its box (so part of it is hidden or spills out)."""
        return self.scroll_width > self.client_width + SLACK

    def __str__(self) -> str:
        return f"{self.label!r} at ({self.x:.0f}, {self.y:.0f}) {self.width:.0f}×{self.height:.0f}"


def intersects(a: Box, b: Box, slack: float = SLACK) -> bool:
    """The two boxes share an area (more than `slack` px each way)."""
    return a.x < b.right - slack and b.x < a.right - slack and a.y < b.bottom - slack and b.y < a.bottom - slack


def inside(a: Box, b: Box, slack: float = SLACK) -> bool:
    """`a` lies wholly inside `b` (within `slack` px)."""
    return a.x >= b.x - slack and a.y >= b.y - slack and a.right <= b.right + slack and a.bottom <= b.bottom + slack


def boxes(page, parts: dict[str, str], root: str | None = None) -> dict[str, list[Box]]:
    """{name: the boxes of what its selector finds under `root`}, read from the page."""
    found = page.evaluate(BOXES_JS, [root, parts])
    return {name: [Box(**b) for b in found[name]] for name in parts}


def overlaps(found: dict[str, list[Box]], pairs: list[tuple[str, str]]) -> list[str]:
    """A line for each two boxes that intersect, one from each named group of a pair (a group paired with itself:
    any two of its boxes)."""
    lines = []
    for first, second in pairs:
        if first == second:
            twos = combinations(found[first], 2)
        else:
            twos = ((a, b) for a in found[first] for b in found[second])
        lines += [f"{first} {a} overlaps {second} {b}" for a, b in twos if intersects(a, b)]
    return lines


def outside(found: dict[str, list[Box]], names: list[str], frame: Box, where: str) -> list[str]:
    """A line for each box of the named groups that is not inside `frame`."""
    return [
        f"{name} {box} is not inside {where} {frame}" for name in names for box in found[name] if not inside(box, frame)
    ]
