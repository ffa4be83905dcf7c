"""Where the canvas was, per file: its zoom and centre, kept in the editor's settings, so
a file opens as it was left rather than fitted afresh.

At most MAX_PLACES files are kept (the least recently shown go first); a setting that is
not what this module wrote is ignored.
"""

from __future__ import annotations

import json

from PySide6.QtCore import QPointF, QSettings

KEY = "view/places"
MAX_PLACES = 50


class ViewPlaces:
    """The zoom and centre of `view` per file path, in `settings`."""

    def __init__(self, settings: QSettings, view):
        self.settings, self.view = settings, view

    def _all(self) -> dict:
        try:
            places = json.loads(str(self.settings.value(KEY, "{}")))
        except ValueError:
            return {}
        return places if isinstance(places, dict) else {}

    def remember(self, path: str | None) -> None:
        """Store the zoom and centre shown now as those of `path`."""
        if not path:
            return
        places = self._all()
        centre = self.view.mapToScene(self.view.viewport().rect().center())
        places.pop(path, None)
        places[path] = [round(self.view.zoom, 4), round(centre.x(), 1), round(centre.y(), 1)]
        while len(places) > MAX_PLACES:
            places.pop(next(iter(places)))
        self.settings.setValue(KEY, json.dumps(places))

    def restore(self, path: str | None) -> bool:
        """Show `path`'s stored zoom and centre; False when none is stored."""
        place = self._all().get(path or "")
        if not (isinstance(place, list) and len(place) == 3
                and all(isinstance(v, int | float) for v in place)):
            return False
        self.view.set_zoom(place[0])
        self.view.centerOn(QPointF(place[1], place[2]))
        self.view.zoom_changed.emit(self.view.zoom)
        return True
