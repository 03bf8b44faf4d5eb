"""The "take it to production" block: for each drafter run, what reproduces it in transformers, vLLM and SGLang, each
a copyable block of code, and in words what an engine's nearest setting gives up. One renderer for the app, the
report and the snapshot page; every text escaped."""

from html import escape

from ..serving.handoff import Handoff

LEAD = (
    "The same drafter elsewhere: a transformers script that writes these tokens, vLLM's <code>--speculative-config"
    "</code>, SGLang's <code>--speculative-*</code> flags. Where an engine has no such method, its nearest setting "
    "and what that gives up."
)


def _engine(setting) -> str:
    note = f'<p class="sv-prod-note">nearest: {escape(setting.nearest)}</p>' if setting.nearest else ""
    if not setting.text:
        return (
            f'<div class="sv-prod-engine"><h4>{escape(setting.engine)}</h4><p>none. {escape(setting.nearest)}</p></div>'
        )
    return (
        f'<div class="sv-prod-engine"><h4>{escape(setting.engine)}</h4>'
        f'<pre class="sv-prod-code"><code>{escape(setting.text)}</code></pre>{note}</div>'
    )


def production_block(handoffs: tuple[Handoff, ...] | list[Handoff], open_first: bool = True) -> str:
    """Each handoff as a fold (the first open), the engines side by side inside it; "" when there are none."""
    if not handoffs:
        return ""
    folds = "".join(
        f'<details class="sv-prod-drafter"{" open" * (open_first and i == 0)}>'
        f"<summary>{escape(h.name)}</summary>"
        f'<div class="sv-prod-engines">{"".join(_engine(s) for s in h.settings)}</div></details>'
        for i, h in enumerate(handoffs)
    )
    return f'<section class="sv-production"><h3>Take it to production</h3><p>{LEAD}</p>{folds}</section>'
