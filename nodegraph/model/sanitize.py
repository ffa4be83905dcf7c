"""Text from a file, made safe to print: control characters shown, never obeyed.

A graph file names nodes, ports, params, groups, devices and itself; any of those strings
may hold ESC sequences (clear the screen, write the clipboard through OSC 52, hide a link
behind OSC 8), a carriage return that overwrites the line before it, or Unicode bidi
overrides that reorder what the reader sees. Every place that prints text made from a file
(the CLI's `validate`, `info`, `run`, the run log, the editor's log panel and messages)
passes it through `clean`, which writes each such character as a visible escape (``\\x1b``,
``\\u202e``) and leaves everything else, non-ASCII names included, as it was.
"""

from __future__ import annotations

import re
import unicodedata

# C0 and C1 controls and DEL; format characters (bidi overrides and isolates, zero-width
# marks) are handled below by category, so new ones in later Unicode versions are caught too.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]|[^\x00-\x7f]")


def _escape(match: re.Match) -> str:
    ch = match.group()
    if ch <= "\x9f":
        return f"\\x{ord(ch):02x}"
    if unicodedata.category(ch) in ("Cf", "Co", "Cs", "Zl", "Zp", "Cn"):
        return f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}"
    return ch


def clean(text: object) -> str:
    """`text` (made a string) with every control and format character escaped, newlines and
    tabs too: a single value from a file (a node id, a name) stays on its line."""
    return _CONTROL.sub(_escape, str(text))


def clean_lines(text: object) -> str:
    """As `clean`, but keeping newlines and tabs: for a whole message of several lines."""
    return "\n".join(clean(line).replace("\\x09", "\t") for line in str(text).split("\n"))
