"""What the screens show, as pure Python: a race of two sides, a γ sweep, every drafter on one prompt (Compare all),
a recorded run replayed. No torch, no Gradio: the app fills these and the renderers draw them."""
