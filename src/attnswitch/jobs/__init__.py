"""Jobs: a run over a folder (`run.py`), its encoding and engine choice, the read pool, Ray,
`watch`, the service's jobs table and the Python calls `attnswitch.index` and
`attnswitch.search` (`api.py`). The top of the document engine: it uses documents and the
index (docs/architecture.md, "Layers")."""
