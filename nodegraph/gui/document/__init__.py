"""The open graph as the editor holds it: its file, undo stack and undoable commands, the
clipboard, recent files and autosave, trusted files, and validation as you edit."""
