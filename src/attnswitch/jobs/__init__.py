"""Jobs: a run over a folder (`run.py`: the job and its frame; its state, `run_state.py`;
its read phase, `read_phase.py`, and encode phase, `encode_phase.py`; what it records of each
document, `record.py`; its two passes, `passes.py`), its encoding and engine choice, the
read pool, Ray, `watch`, the service's jobs table and the Python calls `attnswitch.index`
and `attnswitch.search` (`api.py`). The top of the document engine: it uses documents and
the index (docs/architecture.md, "Layers")."""
