"""The index: the `Store` protocol and its SQLite and PostgreSQL stores, the ANN graph, the
text analyzer, search filters and search. Reads documents' shapes; imports nothing of the
jobs (docs/architecture.md, "Layers")."""
