"""The panels around the canvas: blocks palette and search, inspector, find, problems, log
and help."""
