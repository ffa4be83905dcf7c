"""Running a validated graph: compile it to one module, train it, watch it.

- `compile`: graph -> `nn.Module` plus optimizers, data and metrics
- `train`: the training loop; `checkpoint`, `distributed`: resuming and data-parallel runs
- `train_process`: training in a process of its own, for the editor
- `probes`: activation and gradient summaries; `viewdata`: numbers behind node views
- `procedure`: loops around a trained model (sampling, recall); `lrfind`: the range test
- `render`: a run's events as console lines
"""
