"""Views drawn as HTML, SVG and Plotly figures: Figure 1's rows, the draft tree, a step explained, the panels and
charts, and the two offline pages (a run's snapshot, a workload's report). Used by the app and by the CLI alike;
no torch, no Gradio."""
