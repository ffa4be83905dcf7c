"""`nodegraph ...`: the command line, one module per subcommand.

- `main`: the parser and the dispatch (`nodegraph.cli.main:main` is the console script);
  it imports a subcommand's module only when that command is named
- `common`: what the subcommands share (printing, the graph argument, opening the file)
- `run`, `validate`, `info`, `edit`, `blocks`, `diff`, `forward`, `sample`, `export`,
  `lrfind` (lr-find), `import_model` (import), `sweep` (with `sweep_search`,
  `search_workers`, `search_plot`)
"""
