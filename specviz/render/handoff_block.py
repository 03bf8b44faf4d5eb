"""The "take it to production" block: for each drafter run, what reproduces it in transformers, vLLM and SGLang, each
a block of code kept line for line (scrolled sideways, never broken mid-word), and in words what an engine's nearest
setting gives up; what all the engines give up alike is said once, under them. One renderer for the app, the report
and the snapshot page; every text escaped. In the app (`copy`) each block has a button that copies it; the pages,
which carry no script, select a whole block in one click instead."""

from html import escape

from ..serving.handoff import EngineSetting, Handoff

LEAD = (
    "The same drafter elsewhere: a transformers script that writes these tokens, vLLM's <code>--speculative-config"
    "</code>, SGLang's <code>--speculative-*</code> flags. Where an engine has no such method, its nearest setting "
    "and what that gives up."
)
# copies the code box beside it (its text, not its HTML), and says so on the button
COPY_BUTTON = (
    '<button type="button" class="sv-prod-copy" title="copy to the clipboard" '
    'onclick="navigator.clipboard.writeText(this.previousElementSibling.textContent)'
    ".then(() => { this.textContent = 'copied'; })\">copy</button>"
)


def _notes(setting: EngineSetting) -> list[str]:
    return [part for part in setting.nearest.split("; ") if part]


def shared_notes(settings) -> list[str]:
    """What every engine's setting gives up word for word (said once for all of them); none for a single engine."""
    if len(settings) < 2:
        return []
    first, *others = (_notes(s) for s in settings)
    return [note for note in first if all(note in notes for notes in others)]


def _engine(setting: EngineSetting, shared: list[str], copy: bool) -> str:
    own = "; ".join(note for note in _notes(setting) if note not in shared)
    head = f'<div class="sv-prod-engine"><h4>{escape(setting.engine)}</h4>'
    if not setting.text:
        return f"{head}<p>none{'. ' + escape(own) if own else ''}</p></div>"
    note = f'<p class="sv-prod-note">nearest: {escape(own)}</p>' if own else ""
    selects = "" if copy else " sv-prod-select"
    code = f'<pre class="sv-prod-code{selects}"><code>{escape(setting.text)}</code></pre>'
    return f'{head}<div class="sv-prod-box">{code}{COPY_BUTTON if copy else ""}</div>{note}</div>'


def _fold(h: Handoff, open_it: bool, copy: bool) -> str:
    shared = shared_notes(h.settings)
    alike = f'<p class="sv-prod-note">in every engine: {escape("; ".join(shared))}</p>' if shared else ""
    ran_on = f'<p class="sv-prod-note sv-prod-ran-on">{escape(h.ran_on)}</p>' if h.ran_on else ""
    return (
        f'<details class="sv-prod-drafter"{" open" * open_it}><summary>{escape(h.name)}</summary>{ran_on}'
        f'<div class="sv-prod-engines">{"".join(_engine(s, shared, copy) for s in h.settings)}</div>{alike}</details>'
    )


def production_block(handoffs: tuple[Handoff, ...] | list[Handoff], open_first: bool = True, copy: bool = False) -> str:
    """Each handoff as a fold (the first open), the engines side by side inside it; "" when there are none. `copy`:
    a copy button on each block of code (the app's screen; pages without script leave it out)."""
    if not handoffs:
        return ""
    folds = "".join(_fold(h, open_first and i == 0, copy) for i, h in enumerate(handoffs))
    return f'<section class="sv-production"><h3>Take it to production</h3><p>{LEAD}</p>{folds}</section>'
