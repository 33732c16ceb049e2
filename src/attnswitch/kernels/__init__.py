"""The attention contract, its backends, planning and conformance."""
