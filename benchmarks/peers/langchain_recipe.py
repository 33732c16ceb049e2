"""LangChain's documented recipe over a folder, run in the peers' own environment
(`make bench-peers-env`), never in the project's.

    .bench/peers-venv/bin/python benchmarks/peers/langchain_recipe.py ROOT --model DIR
        --out OUT.json [--queries QUERIES.json] [--hits 50] [--formats markup|all]
        [--modes dense,keyword,hybrid]

The recipe, as LangChain's documentation gives it: one loader per file type
(`BSHTMLLoader` for HTML, `TextLoader` for text and Markdown, `PyPDFLoader`, `Docx2txtLoader`,
`NotebookLoader`, `CSVLoader`, and the `Unstructured*Loader` of the other formats),
`RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)`,
`HuggingFaceEmbeddings` on the model folder, and a `FAISS` vector store. With `--queries`
(a JSON list of {"text": ...}), each query's `--hits` nearest chunks are written as the
paths of their files relative to ROOT, best first: the caller scores them. OUT also holds
how many files were read, the chunks, and the seconds of each stage.

`--modes` adds LangChain's keyword and hybrid recipes over the same chunks: keyword is
`BM25Retriever.from_documents` (langchain_community, over rank_bm25's `BM25Okapi`) with its
defaults, whose preprocessing splits a text on whitespace and keeps its case (no stemming,
no stop words, a run of Chinese or Japanese without spaces one token); hybrid is the
`EnsembleRetriever` of that BM25 retriever and the FAISS one, weights 0.5 and 0.5, as
LangChain's documentation combines them (weighted reciprocal rank fusion, c = 60). Each
retriever is asked for `--hits` chunks.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from recipe_cli import finish, recipe_arguments

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def loader_for(path: Path):
    """The loader LangChain documents for this file's type, or None (not read)."""
    from langchain_community import document_loaders as dl

    suffix = path.suffix.lower()
    by_suffix = {
        ".html": lambda p: dl.BSHTMLLoader(p, open_encoding="utf-8"),
        ".htm": lambda p: dl.BSHTMLLoader(p, open_encoding="utf-8"),
        ".md": lambda p: dl.TextLoader(p, autodetect_encoding=True),
        ".txt": lambda p: dl.TextLoader(p, autodetect_encoding=True),
        ".pdf": dl.PyPDFLoader,
        ".docx": dl.Docx2txtLoader,
        ".doc": dl.UnstructuredWordDocumentLoader,
        ".pptx": dl.UnstructuredPowerPointLoader,
        ".xlsx": dl.UnstructuredExcelLoader,
        ".odt": dl.UnstructuredODTLoader,
        ".epub": dl.UnstructuredEPubLoader,
        ".rtf": dl.UnstructuredRTFLoader,
        ".eml": dl.UnstructuredEmailLoader,
        ".ipynb": dl.NotebookLoader,
        ".csv": dl.CSVLoader,
        ".tsv": lambda p: dl.CSVLoader(p, csv_args={"delimiter": "\t"}),
    }
    make = by_suffix.get(suffix)
    return None if make is None else make(str(path))


def load(root: Path, formats: str) -> tuple[list, dict[str, str]]:
    """(documents, {file: why not read}) over every file under root."""
    docs, failed = [], {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if formats == "markup" and path.suffix.lower() not in (".html", ".htm", ".md", ".txt"):
            continue
        loader = loader_for(path)
        if loader is None:
            failed[rel] = "no loader for this type"
            continue
        try:
            found = loader.load()
        except Exception as exc:  # noqa: BLE001 -- a failed file is a result, not a crash
            failed[rel] = f"{type(exc).__name__}: {str(exc)[:200]}"
            continue
        for d in found:
            d.metadata["source"] = rel
        if not any(d.page_content.strip() for d in found):
            failed[rel] = "no text"
        docs += found
    return docs, failed


def main() -> None:
    args = recipe_arguments(__doc__)
    t0 = time.perf_counter()
    from langchain_community.vectorstores import FAISS
    from langchain_huggingface import HuggingFaceEmbeddings
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    t_import = time.perf_counter()
    docs, failed = load(args.root, args.formats)
    t_load = time.perf_counter()
    chunks = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200).split_documents(
        docs
    )
    t_split = time.perf_counter()
    embeddings = HuggingFaceEmbeddings(model_name=args.model)
    store = FAISS.from_documents(chunks, embeddings)
    t_index = time.perf_counter()
    modes = args.modes.split(",")
    others = {}
    if "keyword" in modes or "hybrid" in modes:
        from langchain_community.retrievers import BM25Retriever

        bm25 = BM25Retriever.from_documents(chunks, k=args.hits)
        others["keyword"] = lambda text: [d.metadata["source"] for d in bm25.invoke(text)]
        if "hybrid" in modes:
            from langchain_classic.retrievers import EnsembleRetriever

            ensemble = EnsembleRetriever(
                retrievers=[bm25, store.as_retriever(search_kwargs={"k": args.hits})],
                weights=[0.5, 0.5],
            )
            others["hybrid"] = lambda text: [d.metadata["source"] for d in ensemble.invoke(text)]
    t_keyword = time.perf_counter()
    out = {
        "system": "langchain",
        "files_read": len({d.metadata["source"] for d in docs if d.page_content.strip()}),
        "documents": len(docs),
        "chunks": len(chunks),
        "not_read": failed,
        "seconds": {
            "import": t_import - t0,
            "load": t_load - t_import,
            "split": t_split - t_load,
            "embed_and_index": t_index - t_split,
            "keyword_index": t_keyword - t_index,
        },
    }
    finish(
        args,
        out,
        "langchain",
        t0,
        t_keyword,
        lambda text: [d.metadata["source"] for d in store.similarity_search(text, k=args.hits)],
        others if modes != ["dense"] else None,
    )


if __name__ == "__main__":
    main()
