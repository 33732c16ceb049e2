"""The document pipeline: ingest -> chunk -> batch -> encode -> store -> search."""
