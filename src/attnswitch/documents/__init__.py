"""Documents: every file kind read into one shape (`readers/`, `readers/blocks.py`), the walk
of a folder (`ingest.py`, `filesystems.py`, `rules.py`) and chunking (`chunk.py`). Imports
nothing of the index or the jobs (docs/architecture.md, "Layers")."""
