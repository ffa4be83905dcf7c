"""The blocks a user reaches for: the last ones added and the ones starred, kept in settings.

The palette and the search popup rank these higher (`ranking.rank`) and the palette lists
them at the top. Every way of adding a block counts as a use: a double-click or Enter in
the palette, a drop from it, a pick in the search popup.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QSettings, Signal

RECENT_KEY, FAVOURITES_KEY = "blocks/recent", "blocks/favourites"
KEEP = 8  # recent blocks remembered


class BlockPrefs(QObject):
    """Recent and favourite block ids, stored in `settings`."""

    changed = Signal()

    def __init__(self, settings: QSettings, parent=None):
        super().__init__(parent)
        self.settings = settings

    def _list(self, key: str) -> list[str]:
        value = self.settings.value(key, [])
        if isinstance(value, str):  # QSettings gives one string for a one-item list
            value = [value]
        # anything else (None when unset, a damaged file's number) reads as no entries
        return [str(v) for v in value] if isinstance(value, list) else []

    @property
    def recent(self) -> list[str]:
        """Most recent first."""
        return self._list(RECENT_KEY)

    @property
    def favourites(self) -> list[str]:
        return self._list(FAVOURITES_KEY)

    def used(self, block_id: str) -> None:
        recent = [block_id, *(b for b in self.recent if b != block_id)][:KEEP]
        self.settings.setValue(RECENT_KEY, recent)
        self.changed.emit()

    def is_favourite(self, block_id: str) -> bool:
        return block_id in self.favourites

    def toggle_favourite(self, block_id: str) -> bool:
        """Star or unstar `block_id`; whether it is a favourite now."""
        favourites = self.favourites
        now = block_id not in favourites
        favourites = [*favourites, block_id] if now else [b for b in favourites
                                                          if b != block_id]
        self.settings.setValue(FAVOURITES_KEY, favourites)
        self.changed.emit()
        return now


def install(window) -> BlockPrefs:
    """Share one `BlockPrefs` between `window`'s palette and search popup, and count every
    block added through them as used."""
    prefs = BlockPrefs(window.settings, window)
    popup = window.edit_actions.popup
    window.palette.set_prefs(prefs)
    popup.prefs = prefs
    window.palette.block_activated.connect(prefs.used)
    window.view.block_dropped.connect(lambda block_id, *_: prefs.used(block_id))
    popup.chosen.connect(prefs.used)
    return prefs
