"""The desktop editor: a PySide6 canvas over the Qt-free core, with pyqtgraph plots.

This package is the only place that imports Qt. The editor never keeps its own copy of the
graph: the canvas mirrors `nodegraph.Graph` through its change events, and every edit is an
undoable command that calls the Graph API. Modules, one job each:

- `app`: `main(path)` for ``nodegraph edit``; `theme`: colours, fonts, the stylesheet
- `document`: the open graph, its file, undo stack and revision; `commands`: the edits
- `node_item`, `wire_item`, `scene`, `view`: the canvas; `wiring`: what may connect
- `palette`, `search_popup`, `fuzzy`: finding blocks; `inspector`, `param_widgets`: params
- `validator`, `problems`: debounced validation and the problems list
- `runner`, `plots`, `log_view`, `run_status`: training in a process of its own
  (`nodegraph.runtime.train_process`) and watching it; `collector`: garbage collected on the GUI
  thread only while the editor's threads run
- `preview`: one node's output for one batch; `clipboard`, `layout`: paste and auto-layout
- `files`, `prompts`, `main_window`, `menus`: files, autosave, questions, the window;
  `trusted_files`: the files the user let run code of their own, by content
- `edit_actions`, `file_actions`: the menus' actions; `group_tabs`: a group's body in a tab
- `annotations`, `annotation_item`: comments and backdrops; `minimap`: the overview
- `watch`: the training animation's wiring into the window: `animation` (the wave),
  `overlays` (strokes, labels, rings), `badges` (gradient and unit trouble), `timeline`,
  `stepthrough`; `node_views`: per-node docks of probe frames and the model
- `_compat`: a guard against a reference-counting bug of PySide6 6.12 on Python 3.11,
  installed by `theme` and `document`, which every window imports before using Qt

Importing this package imports no Qt: `layout`, `fuzzy`, `wiring` and `clipboard` are
Qt-free and scripts use them (the example builders lay their graphs out with `layout`).
"""
