"""`layers.*`: dense layers, reshaping and merging (`dense`), convolutions and pooling
(`conv`)."""
