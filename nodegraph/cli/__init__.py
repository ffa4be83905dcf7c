"""`nodegraph ...`: every subcommand, one module each beside `main` (run, validate, info,
blocks, edit), which assembles the parser.

- `lrfind`: lr-find; `export`: export; `sample`: sample; `import_model`: import;
  `sweep`: sweep
"""
