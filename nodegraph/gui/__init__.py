"""The desktop editor: a PySide6 canvas over the Qt-free core, with pyqtgraph plots.

This package is the only place that imports Qt. The editor never keeps its own copy of the
graph: the canvas mirrors `nodegraph.Graph` through its change events, and every edit is an
undoable command that calls the Graph API. Its parts, each importing only the parts below
it (an import-linter contract in pyproject.toml; `tests/test_gui_imports.py`):

- `shell`: `app.main(path)` for ``nodegraph edit``, `main_window` (creates the parts and
  connects them; every dock made by `MainWindow.add_dock`), `menus`, `edit_actions`,
  `group_tabs` (a group's body in a tab), `panel_edges`, `start_page`, `compare_view`
- `panels` and `training`, side by side: the palette, block search (`search_popup`,
  `ranking`, `fuzzy`), `inspector` and `param_widgets`, `find_panel`, `problems`,
  `log_view`, `help`; and training in a process of its own (`runner`,
  `nodegraph.runtime.train_process`) with its views: `plots`, `run_status`, `run_history`,
  `preview`, the animation (`watch` joins `animation`, `timeline`, `stepthrough`) and the
  per-node views (`node_views`)
- `canvas`: `scene`, `view`, `node_item`, `wire_item`, `routing`, `reroute`, notes
  (`annotation_item`), `overlays` and `badges` drawn while a model is watched, `minimap`,
  `layout` (auto-layout), `arrange`, `collapse`, `image_export`
- `document`: the open graph with its file, undo stack and revision (`document`), the
  undoable edits (`commands`), `clipboard`, `files` (recent, examples, autosave),
  `file_actions`, `trusted_files`, `validator` (debounced, off the GUI thread), `wiring`
  (what may connect), `annotations` and `reroute_points` (kept in the file's `ui` section)
- `base`: `theme`, `application`, `prompts` (the questions asked, replaceable), `later`
  (imports on first use), `collector` (garbage collected on the GUI thread only),
  `_compat` (a guard against a PySide6 6.12 reference bug on Python 3.11, installed by
  `theme` and `document`, which every window imports before using Qt)

Importing this package (or a part) imports no Qt: `canvas.layout`, `panels.fuzzy`,
`document.wiring` and `document.clipboard` are Qt-free and scripts use them (the example
builders lay their graphs out with `canvas.layout`).
"""
