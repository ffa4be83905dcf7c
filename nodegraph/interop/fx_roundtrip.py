"""The round trip's former path, kept for callers: see `nodegraph.interop.importing.roundtrip`."""

from nodegraph.interop.importing.roundtrip import RoundTrip, outputs_of, relative, round_trip

__all__ = ["RoundTrip", "outputs_of", "relative", "round_trip"]
