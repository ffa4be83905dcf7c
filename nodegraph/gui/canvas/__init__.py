"""The canvas: the scene of cards and wires mirroring the document, the view that zooms and
pans it, and what is drawn on it (routes, reroutes, notes, overlays, badges, the minimap)."""
