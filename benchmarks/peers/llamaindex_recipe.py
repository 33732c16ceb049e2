"""LlamaIndex's documented recipe over a folder, run in the peers' own environment
(`make bench-peers-env`), never in the project's.

    .bench/peers-venv/bin/python benchmarks/peers/llamaindex_recipe.py ROOT --model DIR
        --out OUT.json [--queries QUERIES.json] [--hits 50] [--formats markup|all]

The recipe, as LlamaIndex's starter example gives it: `SimpleDirectoryReader(ROOT,
recursive=True).load_data()` (its default file readers; a type without one is read as
text), `Settings.embed_model = HuggingFaceEmbedding(model_name=DIR)`,
`VectorStoreIndex.from_documents` (the default `SentenceSplitter`, 1024 tokens, 200
overlap, and the in-memory vector store), and `index.as_retriever(similarity_top_k=hits)`.
With `--queries` (a JSON list of {"text": ...}), each query's hits are written as the paths
of their files relative to ROOT, best first: the caller scores them. OUT also holds how many
files were read, the chunks, and the seconds of each stage.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from recipe_cli import finish, recipe_arguments

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def main() -> None:
    args = recipe_arguments(__doc__)
    t0 = time.perf_counter()
    from llama_index.core import Settings, SimpleDirectoryReader, VectorStoreIndex
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    t_import = time.perf_counter()
    root = args.root.resolve()
    exts = [".html", ".htm", ".md", ".txt"] if args.formats == "markup" else None
    # exclude_hidden=False: the benchmarks' folders live under the hidden `.bench/`, which
    # the default would take for hidden files; the corpora themselves hold none.
    docs = SimpleDirectoryReader(
        str(root), recursive=True, required_exts=exts, exclude_hidden=False, raise_on_error=False
    ).load_data()
    t_load = time.perf_counter()
    Settings.embed_model = HuggingFaceEmbedding(model_name=args.model)
    index = VectorStoreIndex.from_documents(docs)
    t_index = time.perf_counter()

    def rel(meta: dict) -> str:
        return Path(meta["file_path"]).resolve().relative_to(root).as_posix()

    read = {rel(d.metadata) for d in docs if d.text.strip()}
    every = sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and (exts is None or p.suffix.lower() in exts)
    )
    out = {
        "system": "llamaindex",
        "files_read": len(read),
        "documents": len(docs),
        "chunks": len(index.docstore.docs),
        "not_read": {f: "not read (no text or reader error)" for f in every if f not in read},
        "seconds": {
            "import": t_import - t0,
            "load": t_load - t_import,
            "split_embed_and_index": t_index - t_load,
        },
    }
    retriever = index.as_retriever(similarity_top_k=args.hits)
    finish(
        args,
        out,
        "llamaindex",
        t0,
        t_index,
        lambda text: [rel(h.node.metadata) for h in retriever.retrieve(text)],
    )


if __name__ == "__main__":
    main()
