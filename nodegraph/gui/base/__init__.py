"""What every part of the editor uses: the theme, lazy imports, the GUI-thread collector,
the questions asked of the user, and a guard against a PySide6 bug. Imports no other part."""
