"""Attention tests. Having a conftest here puts this directory on `sys.path` (pytest's
prepend import mode), so tests below it import the shared pins from grid_pins.py."""
