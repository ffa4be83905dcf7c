"""`data.*`: data blocks. `core`: tables, images and synthetic sets; `graphs`: graph data;
`sequences`: text and time series. Underscore modules hold the loaders they share."""
