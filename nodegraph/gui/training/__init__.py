"""Training in the editor: the runner off the GUI thread and the views of a run (plots,
status, history, the animation, timeline, step-through, preview and per-node views)."""
