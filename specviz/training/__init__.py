"""Training the drafters that learn from their target (Medusa heads, the EAGLE head, the DFlash drafter): their
configurations, the self-distilled and local text they read, and the trainers. Only `cli/train.py` uses this; the
drafters themselves (specviz/drafters/) hold only what runs at decode time."""
