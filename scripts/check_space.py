"""Would the Hub take this repository as a Space; run before a push (push_space.py) and by test_space.py.

Would the Hugging Face Hub accept this repository as a Space, and would the Space start? One line per problem.

    python scripts/check_space.py [ROOT]        # exit 0: nothing found; exit 1: one line per problem

What is checked, and why:
- the README's front matter, against the Hub's rules for a Space's configuration (values the Hub refuses a push
  for: a short_description over 60 characters, a colour or hardware it does not know, a malformed model id);
- that it agrees with the code: sdk_version is the pinned gradio, app_file exists, every Hub model a preset pair
  or its heads can load is listed under `models:` (and nothing else is);
- the files a Space upload holds (space_files below, what scripts/push_space.py uploads): every binary file and
  every file over 10 MB must be routed through LFS/Xet by `.gitattributes`, or the Hub refuses the push;
- the upload holds what the app needs at run time and nothing of the tests, docs or CI.
"""

import fnmatch
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COLORS = {"red", "yellow", "green", "blue", "indigo", "purple", "pink", "gray"}
HARDWARE = {
    "cpu-basic",
    "cpu-upgrade",
    "t4-small",
    "t4-medium",
    "l4x1",
    "l4x4",
    "l40sx1",
    "l40sx4",
    "l40sx8",
    "a10g-small",
    "a10g-large",
    "a10g-largex2",
    "a10g-largex4",
    "a100-large",
    "a100x4",
    "a100x8",
}
SDKS = {"gradio", "docker", "static"}
SHORT_DESCRIPTION_MAX = 60
LARGE = 10 * 2**20  # the Hub takes larger files only through LFS/Xet
HUB_PART = re.compile(r"^(?!.*(--|\.\.))[A-Za-z0-9](?:[\w.-]{0,94}[A-Za-z0-9])?$")

# What a Space runs on: the app, its package, its assets, what pip installs, the front matter, the LFS rules; and
# the pages and pictures its README (the Space's own page) links to.
SPACE_INCLUDE = (
    "app.py",
    "README.md",
    "requirements.txt",
    "requirements-app.txt",
    ".gitattributes",
    "specviz/**/*",
    "assets/**/*",
    "docs/**/*",
)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")  # a Markdown link or image: its target
SPACE_EXCLUDE = ("**/__pycache__/**", "*.pyc", "*.pyi")
RUN_TIME_NEEDS = (
    "app.py",
    "README.md",
    "requirements.txt",
    "specviz/app/ui/layout.py",
    "assets/specviz.css",
    "assets/prompts.json",
)


def front_matter(readme: Path) -> dict:
    import yaml

    text = readme.read_text(encoding="utf-8")
    match = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    if not match:
        raise ValueError("README.md does not start with a YAML front matter block (--- ... ---)")
    data = yaml.safe_load(match.group(1))
    if not isinstance(data, dict):
        raise ValueError("README.md's front matter is not a mapping")
    return data


def _glob(root: Path, pattern: str) -> list[Path]:
    return (
        [p for p in root.glob(pattern) if p.is_file()]
        if any(c in pattern for c in "*?[")
        else ([root / pattern] if (root / pattern).is_file() else [])
    )


def space_files(root: Path = ROOT) -> list[str]:
    """The repository paths a Space upload holds, sorted."""
    found = {p.relative_to(root).as_posix() for pattern in SPACE_INCLUDE for p in _glob(root, pattern)}
    return sorted(
        f for f in found if not any(fnmatch.fnmatch(f, x) or fnmatch.fnmatch(Path(f).name, x) for x in SPACE_EXCLUDE)
    )


def lfs_patterns(root: Path) -> list[str]:
    attributes = root / ".gitattributes"
    if not attributes.is_file():
        return []
    patterns = []
    for line in attributes.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if parts and not parts[0].startswith("#") and any(a in ("filter=lfs", "filter=xet") for a in parts[1:]):
            patterns.append(parts[0])
    return patterns


def routed(path: str, patterns: list[str]) -> bool:
    """Whether a .gitattributes pattern covers `path` (a pattern with no slash matches the file's name anywhere)."""
    for pattern in patterns:
        if "/" not in pattern.rstrip("/"):
            if fnmatch.fnmatch(Path(path).name, pattern):
                return True
        elif fnmatch.fnmatch(path, pattern.lstrip("/").replace("**/", "*")):
            return True
    return False


def is_binary(path: Path) -> bool:
    head = path.read_bytes()[:8192]
    if b"\0" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:  # a cut multibyte character at the end of the sample is still text
        return exc.start < len(head) - 4
    return False


def hub_models_used() -> set[str]:
    """Every Hub repository a preset pair loads: both models and the heads it brings."""
    sys.path.insert(0, str(ROOT))
    from specviz.app.shelf import HUB_PAIRS
    from specviz.models.loading import looks_like_hub_id

    names = {n for p in HUB_PAIRS for n in (p.target, p.draft, *(value for _, value in p.options))}
    return {n for n in names if looks_like_hub_id(n)}


def pinned(root: Path, package: str) -> str | None:
    for name in ("requirements-app.txt", "requirements.txt"):
        path = root / name
        if path.is_file():
            for line in path.read_text().splitlines():
                m = re.match(rf"^{re.escape(package)}==([\w.+-]+)", line.strip())
                if m:
                    return m.group(1)
    return None


def config_problems(meta: dict, root: Path) -> list[str]:
    problems = []

    def need(key, kind=str):
        value = meta.get(key)
        if not isinstance(value, kind):
            problems.append(f"front matter: `{key}` is missing or not a {kind.__name__} (got {value!r})")
            return None
        return value

    title = need("title")
    if title is not None and not title.strip():
        problems.append("front matter: `title` is empty")
    emoji = need("emoji")
    if emoji is not None and (not emoji.strip() or any(c.isascii() for c in emoji) or len(emoji) > 8):
        problems.append(f"front matter: `emoji` must be one emoji, got {emoji!r}")
    for key in ("colorFrom", "colorTo"):
        value = need(key)
        if value is not None and value not in COLORS:
            problems.append(f"front matter: `{key}` must be one of {', '.join(sorted(COLORS))}, got {value!r}")
    sdk = need("sdk")
    if sdk is not None and sdk not in SDKS:
        problems.append(f"front matter: `sdk` must be one of {', '.join(sorted(SDKS))}, got {sdk!r}")
    if sdk == "gradio":
        version, gradio = need("sdk_version"), pinned(root, "gradio")
        if version is not None and version != gradio:
            problems.append(f"front matter: `sdk_version` {version} is not the pinned gradio ({gradio})")
    python = meta.get("python_version")
    if python is not None and not (isinstance(python, str) and re.fullmatch(r"3\.\d+(\.\d+)?", python)):
        problems.append(f'front matter: `python_version` must be a quoted string like "3.11", got {python!r}')
    app_file = need("app_file")
    if app_file is not None and not (root / app_file).is_file():
        problems.append(f"front matter: `app_file` {app_file} does not exist")
    short = meta.get("short_description")
    if short is not None:
        if not isinstance(short, str):
            problems.append(f"front matter: `short_description` must be a string, got {short!r}")
        elif len(short) > SHORT_DESCRIPTION_MAX:
            problems.append(
                f"front matter: `short_description` is {len(short)} characters; the Hub allows "
                f"{SHORT_DESCRIPTION_MAX}: {short!r}"
            )
    hardware = meta.get("suggested_hardware")
    if hardware is not None and hardware not in HARDWARE:
        problems.append(
            f"front matter: `suggested_hardware` {hardware!r} is not a Space hardware flavor "
            f"({', '.join(sorted(HARDWARE))})"
        )
    if "pinned" in meta and not isinstance(meta["pinned"], bool):
        problems.append(f"front matter: `pinned` must be true or false, got {meta['pinned']!r}")
    models = meta.get("models", [])
    if not isinstance(models, list):
        problems.append(f"front matter: `models` must be a list of Hub ids, got {models!r}")
        models = []
    for model in models:
        parts = str(model).split("/")
        if len(parts) > 2 or not all(HUB_PART.match(p) for p in parts) or str(model).endswith(".git"):
            problems.append(f"front matter: `models` entry {model!r} is not a Hub model id (owner/name)")
    used = hub_models_used()
    for missing in sorted(used - set(map(str, models))):
        problems.append(f"front matter: the app loads {missing} but `models` does not list it")
    for extra in sorted(set(map(str, models)) - used):
        problems.append(f"front matter: `models` lists {extra}, which no preset pair loads")
    return problems


def file_problems(root: Path, files: list[str]) -> list[str]:
    problems, patterns = [], lfs_patterns(root)
    if not patterns:
        problems.append(".gitattributes: missing, or routes nothing through LFS (filter=lfs)")
    for name in files:
        path = root / name
        size = path.stat().st_size
        if routed(name, patterns):
            continue
        if size > LARGE:
            problems.append(
                f"{name}: {size / 2**20:.1f} MB and not routed through LFS by .gitattributes "
                f"(the Hub refuses plain files over 10 MB)"
            )
        elif size and is_binary(path):
            problems.append(
                f"{name}: a binary file not routed through LFS by .gitattributes (the Hub refuses "
                f"binary files pushed as plain git objects)"
            )
    for name in RUN_TIME_NEEDS:
        if name not in files:
            problems.append(f"upload: {name} is missing (the app needs it at run time)")
    for name in files:
        if name.split("/")[0] in ("tests", ".ci", "scripts"):
            problems.append(f"upload: {name} is not needed by the Space at run time")
    return problems


def readme_links(root: Path) -> list[str]:
    """The repository paths README.md links to or shows (web addresses and anchors within the page left out)."""
    text = (root / "README.md").read_text(encoding="utf-8")
    targets = (t.split("#")[0] for t in LINK.findall(text) if not re.match(r"[a-z]+:|#", t))
    return sorted({Path(t).as_posix() for t in targets if t})


def link_problems(root: Path, files: list[str]) -> list[str]:
    """A link or picture on the Space's page whose file the upload would not carry shows broken there."""
    carried = set(files)
    missing = [t for t in readme_links(root) if t not in carried]
    return [f"README.md links {t}, which the Space upload does not carry" for t in missing]


def check(root: Path = ROOT) -> list[str]:
    try:
        meta = front_matter(root / "README.md")
    except (OSError, ValueError) as exc:
        return [f"README.md: {exc}"]
    except Exception as exc:  # a YAML error: its first line says where
        return [f"README.md: the front matter is not valid YAML: {str(exc).splitlines()[0]}"]
    files = space_files(root)
    return config_problems(meta, root) + file_problems(root, files) + link_problems(root, files)


def main(argv: list[str]) -> int:
    root = Path(argv[0]).resolve() if argv else ROOT
    problems = check(root)
    for line in problems:
        print(f"error: {line}")
    if not problems:
        print(f"ok: {root.name} is a Space the Hub accepts ({len(space_files(root))} files to upload)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
