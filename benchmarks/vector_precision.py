"""The stored vectors' precision: search quality and the index's size on disk (issue 39).

    python benchmarks/vector_precision.py [--python-docs 110] [--per-kind 150]
        [--store-dir DIR] [--upgraded-from DIR] [--no-postgres] --out RUN.json
    python benchmarks/vector_precision.py --report RUN.json [RUN.json ...] \\
        --md docs/results/vector_precision.md --json docs/results/vector_precision.json

A run measures the attnswitch that is imported (run it with `PYTHONPATH=<tree>/src` to
measure another revision: the one before the stores kept float16 is the parent of the
commit that made them), on the corpora, queries and metrics of `search_quality.py`
(imported, not copied): the example corpus and, with `--python-docs N`, Debian's Python
documentation.

Quality. Each corpus is indexed by the real pipeline (`jobs.run.run`, default options) into
a SQLite store kept in `--store-dir` (named after the precision that revision stores, so a
second call only re-reads it). Its vectors, as stored, are then rounded in memory to each
candidate precision and the queries searched again through `indexing.search.search` (dense and
hybrid, as shipped) with the store's dense search replaced by one over the rounded vectors,
two ways: exact (numpy, what a store below `EXACT_BELOW` chunks does) and through a usearch
HNSW graph of that precision (what a larger SQLite store does; `ann.HnswIndex`'s graph
parameters and `EF_SEARCH`). The candidates:

- float32: the vectors as stored (by the revision before: the encoder's float32 output);
- float16: IEEE half precision, each element rounded to nearest (pgvector's `halfvec`,
  usearch's `f16`);
- int8, scale per vector: each vector divided by its largest absolute element and scaled to
  -127..127, rounded, with its scale (a float32) beside it: dequantised, the element is
  the integer times the scale; in the graph, usearch's `i8` of the vector so scaled, by
  cosine (the scale cancels);
- int8, usearch's fixed range: usearch's own `i8` cast (each element times 127, rounded,
  clipped to -127..127, the same for every vector), by cosine, as usearch compares `i8`.
  A unit vector of 384 dimensions has elements of about 0.05: 6 or so steps of 127.

Besides the candidates, the store as the revision wrote it is searched through its own code:
the SQLite store exact (its default below `EXACT_BELOW` chunks) and through its own HNSW
graph (a copy opened with `exact_below=0`, so `ann.HnswIndex` builds and saves the graph of
that revision, in its dtype), and a PostgreSQL store (a throwaway local cluster,
`search_quality.stores`) that the same documents, chunks and vectors are written to
through `PostgresStore.write_document` (no encoding), searched through pgvector's HNSW.

The metrics are `search_quality.py`'s: per kind of query, the answer file's rank among the
distinct files of 50 hits gives MRR@10 and recall@10 (`search_quality.file_rank`,
`metrics`); besides, for dense search, the share of float32's exact 10 nearest chunks that
a candidate's top 10 holds (neighbour recall@10).

Sizes, from real stores written by the code (none computed): the SQLite file as the run
left it (checkpointed, its WAL folded in), its bytes per table and index (SQLite's `dbstat`),
the HNSW graph file the store writes beside it once past `EXACT_BELOW` chunks (built here
from the copy above), and the PostgreSQL chunks table with its indexes (HNSW included),
against the documents' text: the UTF-8 bytes of the stored chunks' text. No timings are
taken (the machine was busy with other benchmarks).

`--upgraded-from DIR` (a revision that stores float16, DIR the `--store-dir` of a run of the
revision before): a copy of each corpus's float32 store there is opened by this revision,
which upgrades it in place (`sqlite_schema`, version 8); its size and its answers through
this revision's search are recorded beside the store this revision wrote.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_quality as sq  # noqa: E402
from synthetic import cpu_description  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CANDIDATES = ("float32", "float16", "int8, scale per vector", "int8, usearch fixed range")
MODES = ("dense", "hybrid")
PATHS = ("exact", "graph")
# "Keeps search quality": MRR@10 of dense and of hybrid search at most this much below
# float32's, on every kind of query of every corpus, exact and through the graph.
KEEPS = 0.005
NEIGHBOURS = 10


# ---------------------------------------------------------------------------------------
# Candidates: the stored vectors rounded in memory.


def rounded(matrix: np.ndarray, candidate: str) -> np.ndarray:
    """`matrix` `[N, dim]` float32 as a store of `candidate` precision would give it back
    (float32), for exact search."""
    if candidate == "float32":
        return matrix
    if candidate == "float16":
        return matrix.astype(np.float16).astype(np.float32)
    if candidate == "int8, scale per vector":
        scale = np.abs(matrix).max(axis=1, keepdims=True) / 127.0
        return np.rint(matrix / scale).astype(np.int8).astype(np.float32) * scale.astype(np.float32)
    if candidate == "int8, usearch fixed range":
        q = np.clip(np.rint(matrix * 127.0), -127, 127).astype(np.float32)
        # usearch compares i8 vectors by cosine: the same ranking as the inner product of
        # the dequantised vectors made unit again
        return q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
    raise ValueError(f"candidate: expected one of {CANDIDATES}, got {candidate!r}")


def graph(ids: np.ndarray, matrix: np.ndarray, candidate: str) -> Any:
    """A usearch HNSW graph of `matrix` in `candidate` precision, with the store's graph
    parameters (`ann.CONNECTIVITY`, `ann.EXPANSION_ADD`), built on one thread."""
    from usearch.index import Index

    from attnswitch.indexing.ann import CONNECTIVITY, EXPANSION_ADD

    dtype, metric, data = {
        "float32": ("f32", "ip", matrix),
        "float16": ("f16", "ip", matrix),
        "int8, scale per vector": ("i8", "cos", matrix / np.abs(matrix).max(axis=1, keepdims=True)),
        "int8, usearch fixed range": ("i8", "cos", matrix),
    }[candidate]
    index = Index(
        ndim=matrix.shape[1],
        metric=metric,
        dtype=dtype,
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
    )
    index.add(ids.astype(np.uint64), np.ascontiguousarray(data, np.float32), threads=1)
    return index


class Searched:
    """A store whose dense search is replaced: exact over `matrix`, or through `index` (a
    usearch graph, searched with the call's beam); everything else is the store's."""

    def __init__(self, store: Any, ids: np.ndarray, matrix: np.ndarray, index: Any = None):
        self._store, self._ids, self._matrix, self._index = store, ids, matrix, index

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def dense(
        self, queries: np.ndarray, n: int, ef: int | None = None, where: Any = None
    ) -> list[list[tuple[int, float]]]:
        from attnswitch.indexing.ann import exact_top_k

        if where is not None:
            raise ValueError(f"where: expected None here, got {where!r}")
        if self._index is None:
            return exact_top_k(self._ids, self._matrix, queries, n)
        self._index.expansion_search = max(self._store.beam(ef), n)
        out = []
        for q in queries:
            found = self._index.search(q, n, threads=1)
            out.append(
                [(int(k), float(1.0 - d)) for k, d in zip(found.keys, found.distances, strict=True)]
            )
        return out


# ---------------------------------------------------------------------------------------
# Scoring (search_quality's ranks and metrics).


def ranks(
    store: Any, corpus: sq.Corpus, vectors: np.ndarray
) -> tuple[dict[str, dict[str, list[int | None]]], list[list[int]]]:
    """mode -> kind -> the answer file's rank per query, through `indexing.search.search`;
    and each query's dense top `NEIGHBOURS` chunk ids."""
    from attnswitch.indexing.search import normalised, search

    out: dict[str, dict[str, list[int | None]]] = {m: {} for m in MODES}
    nearest = []
    for q, v in zip(corpus.queries, vectors, strict=True):
        for mode in MODES:
            hits = search(store, v, sq.HITS, text=q.text, mode=mode)
            files = {h.chunk_id: h.source for h in hits}
            out[mode].setdefault(q.kind, []).append(
                sq.file_rank([(h.chunk_id, h.score) for h in hits], files, q.target)
            )
        nearest.append(
            [cid for cid, _ in store.dense(normalised(v[None, :], store.dim), NEIGHBOURS)[0]]
        )
    return out, nearest


def scored(
    by_mode: dict[str, dict[str, list[int | None]]],
    nearest: list[list[int]],
    reference: list[list[int]],
    corpus: sq.Corpus,
) -> dict[str, Any]:
    """kind -> mode -> metrics, and kind -> neighbour recall@10 against `reference`."""
    kinds = list(dict.fromkeys(q.kind for q in corpus.queries))
    overlap: dict[str, list[float]] = {}
    for q, got, want in zip(corpus.queries, nearest, reference, strict=True):
        overlap.setdefault(q.kind, []).append(len(set(got) & set(want)) / max(1, len(want)))
    return {
        "metrics": {k: {m: sq.metrics(by_mode[m][k]) for m in MODES} for k in kinds},
        "neighbour_recall": {k: float(np.mean(v)) for k, v in overlap.items()},
    }


# ---------------------------------------------------------------------------------------
# Sizes of the real stores.


def stored_precision() -> str:
    """What the imported revision stores (`records.VECTOR_DTYPE` where it has one)."""
    from attnswitch.indexing import records

    return str(getattr(records, "VECTOR_DTYPE", "float32"))


def sqlite_sizes(path: Path) -> dict[str, Any]:
    """Bytes of the SQLite file (its WAL folded in first) and of its parts."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        tables = {
            name: int(size)
            for name, size in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")
        }
        chunks, text, vectors, headings, keys = conn.execute(
            "SELECT COUNT(*), SUM(length(CAST(text AS BLOB))), SUM(length(vector)), "
            "SUM(length(CAST(heading_path AS BLOB))), SUM(length(vector_key)) FROM chunks"
        ).fetchone()
        files = conn.execute(
            "SELECT COUNT(*), SUM(size) FROM documents WHERE status = 'indexed'"
        ).fetchone()
        page = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    return {
        "file": path.stat().st_size,
        "page_size": page,
        "chunks": int(chunks),
        "documents": int(files[0]),
        "document_files": int(files[1] or 0),
        "text": int(text or 0),
        "vectors": int(vectors or 0),
        "heading_paths": int(headings or 0),
        "vector_keys": int(keys or 0),
        "tables": tables,
    }


def with_graph(path: Path, into: Path) -> tuple[Any, int]:
    """A copy of the store at `path` opened with `exact_below=0` and its HNSW graph written
    by the store itself (`sync_index`): (the open store, the graph file's bytes)."""
    from attnswitch.indexing.ann import HnswIndex
    from attnswitch.indexing.store import SQLiteStore

    copy = into / path.name
    shutil.copyfile(path, copy)
    store = SQLiteStore(copy, exact_below=0)
    with store.exclusive():
        store.sync_index()
    return store, HnswIndex.paths(copy)[0].stat().st_size


def replay(store: Any, into: Any) -> None:
    """Write every indexed document of `store`, with its chunks and vectors as stored, to
    the empty store `into`, through `write_document` (no encoding)."""
    from attnswitch.documents.ingest import Document
    from attnswitch.indexing.config import IndexConfig
    from attnswitch.indexing.records import ChunkRecord

    config = store.meta("index")
    fingerprint = IndexConfig.from_json(config).vector_fingerprint if config else None
    ids, matrix = store.vectors()
    row_of = {int(i): r for r, i in enumerate(ids)}
    for root in store.roots():
        for source in sorted(store.sources(root)):
            doc = store.lookup(root, source)
            if doc is None or doc.status != "indexed":
                continue
            chunks = store.document_chunks(root, source)
            rows = store._read(f"SELECT kind FROM documents WHERE id = {store._mark}", (doc.id,))
            kind = rows[0][0]
            into.write_document(
                Document(
                    root,
                    source,
                    Path(root) / source,
                    doc.size,
                    doc.mtime_ns,
                    doc.sha256,
                    kind,
                    "\n\n".join(c.text for c in chunks),
                ),
                [
                    ChunkRecord(c.text, c.n_tokens, c.start, c.end, c.heading_path, c.location)
                    for c in chunks
                ],
                matrix[[row_of[c.id] for c in chunks]],
                config=doc.config,
                vector_fingerprint=fingerprint,
            )
    for key in ("index",):
        if (value := store.meta(key)) is not None:
            into.set_meta(key, value)


def postgres_sizes(conn: Any) -> dict[str, Any]:
    """Bytes of the chunks table (heap and TOAST) and of each of its indexes."""
    conn.execute("VACUUM ANALYZE chunks")
    heap = conn.execute("SELECT pg_table_size('chunks')").fetchone()[0]
    indexes = {
        name: int(size)
        for name, size in conn.execute(
            "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index "
            "WHERE indrelid = 'chunks'::regclass"
        )
    }
    column = conn.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
        "'chunks'::regclass AND attname = 'embedding'"
    ).fetchone()[0]
    vectors = conn.execute("SELECT SUM(pg_column_size(embedding)) FROM chunks").fetchone()[0]
    version = conn.execute(
        "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
    ).fetchone()[0]
    return {
        "table": int(heap),
        "indexes": indexes,
        "column": column,
        "vectors": int(vectors or 0),
        "pgvector": version,
        "total": int(conn.execute("SELECT pg_total_relation_size('chunks')").fetchone()[0]),
    }


# ---------------------------------------------------------------------------------------
# A run.


def code_revision() -> dict[str, Any]:
    """The revision of the attnswitch imported, and whether its src/ is edited."""
    import attnswitch

    src = Path(attnswitch.__file__).resolve().parents[1]
    git = ["git", "-C", str(src)]
    out = [
        subprocess.run([*git, *args], capture_output=True, text=True, check=False).stdout.strip()
        for args in (
            ["rev-parse", "HEAD"],
            ["status", "--porcelain", "--", "."],
            ["log", "-1", "--format=%s"],
        )
    ]
    return {
        "commit": out[0],
        "src_edited": bool(out[1]),
        "subject": out[2] if len(out[2]) <= 72 else out[2][:71] + "…",
    }


def measure(corpus: sq.Corpus, store_dir: Path, encoder: Any, pg: Any) -> dict[str, Any]:
    from attnswitch.indexing.location import open_store

    precision = stored_precision()
    path = store_dir / f"{corpus.name}-{precision}.sqlite3"
    sq.build_queries(corpus, ARGS.per_kind)
    with sq.index(corpus, path):  # indexed by the pipeline, or only re-read
        pass
    vectors = encoder.encode([q.text for q in corpus.queries])
    out: dict[str, Any] = {
        "queries": len(corpus.queries),
        "kinds": {},
        "quality": {},
        "as_stored": {},
    }
    for q in corpus.queries:
        out["kinds"][q.kind] = out["kinds"].get(q.kind, 0) + 1
    with open_store(path) as store:
        ids, matrix = store.vectors()
        norms = np.linalg.norm(matrix, axis=1)
        out["norm_range"] = [float(norms.min()), float(norms.max())]
        reference = None
        for candidate in CANDIDATES:
            m = rounded(matrix, candidate)
            for how in PATHS:
                searched = Searched(
                    store, ids, m, graph(ids, matrix, candidate) if how == "graph" else None
                )
                by_mode, nearest = ranks(searched, corpus, vectors)
                if reference is None:  # float32, exact: the neighbours to find
                    reference = nearest
                out["quality"].setdefault(candidate, {})[how] = scored(
                    by_mode, nearest, reference, corpus
                )
                print(
                    f"{corpus.name}: {candidate}, {how}: dense "
                    f"{np.mean([v['dense']['mrr_at_10'] for v in out['quality'][candidate][how]['metrics'].values()]):.4f}",
                    flush=True,
                )
        assert reference is not None
        # the store as this revision wrote it, through its own search
        out["as_stored"]["sqlite exact"] = scored(*ranks(store, corpus, vectors), reference, corpus)
        out["sizes"] = {"sqlite": sqlite_sizes(path)}
        with tempfile.TemporaryDirectory() as tmp:
            copy, graph_bytes = with_graph(path, Path(tmp))
            with copy:
                out["as_stored"]["sqlite graph"] = scored(
                    *ranks(copy, corpus, vectors), reference, corpus
                )
            out["sizes"]["sqlite"]["graph"] = graph_bytes
        older = ARGS.upgraded_from and ARGS.upgraded_from / f"{corpus.name}-float32.sqlite3"
        if older and older.is_file() and precision != "float32":
            with tempfile.TemporaryDirectory() as tmp:  # the earlier revision's store,
                copy_path = Path(tmp) / older.name  # opened (so upgraded) by this one
                shutil.copyfile(older, copy_path)
                with open_store(copy_path) as upgraded:
                    out["as_stored"]["sqlite upgraded"] = scored(
                        *ranks(upgraded, corpus, vectors), reference, corpus
                    )
                out["sizes"]["sqlite upgraded"] = sqlite_sizes(copy_path)
        if pg is not None:
            from attnswitch.indexing.store_postgres import PostgresStore

            with PostgresStore(pg(f"vp_{corpus.name}_{precision}")) as target:
                replay(store, target)
                out["as_stored"]["postgres"] = scored(
                    *ranks(target, corpus, vectors), reference, corpus
                )
                out["sizes"]["postgres"] = postgres_sizes(target._conn)
    out["dim"] = int(matrix.shape[1])
    return out


def run(args: argparse.Namespace) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from attnswitch.engines import get_engine

    args.store_dir.mkdir(parents=True, exist_ok=True)
    corpora = [sq.Corpus("example", ROOT / "examples" / "corpus")]
    if args.python_docs:
        corpora.append(
            sq.Corpus(
                "python-docs",
                sq.python_docs(args.store_dir / "python-docs-pages", args.python_docs),
            )
        )
    encoder = get_engine()
    result: dict[str, Any] = {
        "code": code_revision(),
        "stored": stored_precision(),
        "cpu": cpu_description(),
        "machine": platform.machine(),
        "python_docs": args.python_docs,
        "per_kind": args.per_kind,
        "corpora": {},
    }
    if args.no_postgres:
        for c in corpora:
            result["corpora"][c.name] = measure(c, args.store_dir, encoder, None)
    else:
        with sq.stores("postgres", args.store_dir) as pg:
            for c in corpora:
                result["corpora"][c.name] = measure(c, args.store_dir, encoder, pg)
    args.out.write_text(json.dumps(result, indent=1))
    print(f"written {args.out}")


# ---------------------------------------------------------------------------------------
# The page.


def mb(n: float) -> str:
    return f"{n / 1e6:.2f}"


def quality_table(run: dict[str, Any]) -> list[str]:
    """MRR@10 per corpus, kind, mode and candidate (exact | graph); the drop from float32
    marked where it is larger than `KEEPS`."""
    lines = [
        "| corpus | kind | queries | mode | " + " | ".join(CANDIDATES) + " |",
        "|---|---|---:|---|" + "---:|" * len(CANDIDATES),
    ]
    for name, c in run["corpora"].items():
        for kind, n in c["kinds"].items():
            for mode in MODES:
                cells = []
                for cand in CANDIDATES:
                    parts = []
                    for how in PATHS:
                        base = c["quality"]["float32"][how]["metrics"][kind][mode]["mrr_at_10"]
                        got = c["quality"][cand][how]["metrics"][kind][mode]["mrr_at_10"]
                        parts.append(f"{got:.3f}{' ✗' if got < base - KEEPS else ''}")
                    cells.append(" \\| ".join(parts))
                lines.append(f"| {name} | {kind} | {n} | {mode} | " + " | ".join(cells) + " |")
    return lines


def recall_table(run: dict[str, Any]) -> list[str]:
    """Recall@10 (file level, dense and hybrid) and neighbour recall@10 (dense, against
    float32's exact top 10), exact search, per corpus and kind."""
    lines = [
        "| corpus | kind | " + " | ".join(CANDIDATES) + " |",
        "|---|---|" + "---:|" * len(CANDIDATES),
    ]
    for name, c in run["corpora"].items():
        for kind in c["kinds"]:
            cells = []
            for cand in CANDIDATES:
                q = c["quality"][cand]["exact"]
                cells.append(
                    f"{q['metrics'][kind]['dense']['recall_at_10']:.3f} / "
                    f"{q['metrics'][kind]['hybrid']['recall_at_10']:.3f} / "
                    f"{q['neighbour_recall'][kind]:.3f}"
                )
            lines.append(f"| {name} | {kind} | " + " | ".join(cells) + " |")
    return lines


def verdicts(run: dict[str, Any]) -> dict[str, float]:
    """candidate -> its largest MRR@10 drop from float32 over corpora, kinds, modes and
    both search paths."""
    out = {}
    for cand in CANDIDATES:
        drops = [
            c["quality"]["float32"][how]["metrics"][k][m]["mrr_at_10"]
            - c["quality"][cand][how]["metrics"][k][m]["mrr_at_10"]
            for c in run["corpora"].values()
            for how in PATHS
            for k in c["kinds"]
            for m in MODES
        ]
        out[cand] = max(drops)
    return out


def as_stored_table(runs: list[dict[str, Any]]) -> list[str]:
    """MRR@10 of dense and hybrid through each revision's own stores."""
    heads = [
        (r["stored"], where)
        for r in runs
        for where in r["corpora"][next(iter(r["corpora"]))]["as_stored"]
    ]
    lines = [
        "| corpus | kind | mode | " + " | ".join(f"{p}: {w}" for p, w in heads) + " |",
        "|---|---|---|" + "---:|" * len(heads),
    ]
    first = runs[0]
    for name, c in first["corpora"].items():
        for kind in c["kinds"]:
            for mode in MODES:
                cells = [
                    f"{r['corpora'][name]['as_stored'][w]['metrics'][kind][mode]['mrr_at_10']:.3f}"
                    for r in runs
                    for p, w in heads
                    if p == r["stored"]
                ]
                lines.append(f"| {name} | {kind} | {mode} | " + " | ".join(cells) + " |")
    return lines


def sizes_table(runs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| corpus | stored | chunks | text (MB) | vectors (MB) | SQLite file (MB) "
        "| chunks table (MB) | bytes per chunk | HNSW file (MB) | file + graph (MB) "
        "| file / text | file + graph / text |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in runs[0]["corpora"]:
        for r in runs:
            for key, label in (
                ("sqlite", r["stored"]),
                ("sqlite upgraded", f"{r['stored']}, upgraded from float32"),
            ):
                s = r["corpora"][name]["sizes"].get(key)
                if s is None:
                    continue
                graph = s.get("graph")
                whole = s["file"] + (graph or 0)
                lines.append(
                    f"| {name} | {label} | {s['chunks']} | {mb(s['text'])} | "
                    f"{mb(s['vectors'])} | {mb(s['file'])} | "
                    f"{mb(s['tables'].get('chunks', 0))} | {s['file'] / s['chunks']:.0f} | "
                    + (f"{mb(graph)} | {mb(whole)} | " if graph is not None else "— | — | ")
                    + f"{s['file'] / s['text']:.2f} | "
                    + (f"{whole / s['text']:.2f} |" if graph is not None else "— |")
                )
    return lines


def parts_table(runs: list[dict[str, Any]]) -> list[str]:
    """The SQLite file's bytes per table and index (dbstat), per corpus and revision."""
    names = sorted(
        {t for r in runs for c in r["corpora"].values() for t in c["sizes"]["sqlite"]["tables"]},
        key=lambda t: (
            -max(
                c["sizes"]["sqlite"]["tables"].get(t, 0)
                for r in runs
                for c in r["corpora"].values()
            )
        ),
    )
    names = [
        t
        for t in names
        if max(
            c["sizes"]["sqlite"]["tables"].get(t, 0) for r in runs for c in r["corpora"].values()
        )
        >= 40960
    ]
    heads = [(name, r) for name in runs[0]["corpora"] for r in runs]
    lines = [
        "| table or index | " + " | ".join(f"{n}, {r['stored']}" for n, r in heads) + " |",
        "|---|" + "---:|" * len(heads),
    ]
    for t in names:
        lines.append(
            f"| {t} | "
            + " | ".join(
                mb(r["corpora"][n]["sizes"]["sqlite"]["tables"].get(t, 0)) for n, r in heads
            )
            + " |"
        )
    return lines


def postgres_table(runs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| corpus | column | chunks | vectors (MB) | table (MB) | HNSW index (MB) | "
        "other indexes (MB) | total (MB) | total / text |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in runs[0]["corpora"]:
        for r in runs:
            p = r["corpora"][name]["sizes"].get("postgres")
            if p is None:
                continue
            s = r["corpora"][name]["sizes"]["sqlite"]
            hnsw = sum(v for k, v in p["indexes"].items() if "hnsw" in k)
            lines.append(
                f"| {name} | `{p['column']}` | {s['chunks']} | {mb(p['vectors'])} | "
                f"{mb(p['table'])} | {mb(hnsw)} | "
                f"{mb(sum(p['indexes'].values()) - hnsw)} | {mb(p['total'])} | "
                f"{p['total'] / s['text']:.2f} |"
            )
    return lines


def report(args: argparse.Namespace) -> None:
    runs = [json.loads(Path(p).read_text()) for p in args.report]
    runs.sort(key=lambda r: r["stored"] != "float32")
    base = runs[0]
    lines = [
        f"Measured on {base['cpu']}; model all-MiniLM-L6-v2 (dimension "
        f"{next(iter(base['corpora'].values()))['dim']}); "
        + "; ".join(
            f"{r['stored']} stores: revision {r['code']['commit'][:10]} "
            f"({r['code']['subject']}"
            f"{', src edited' if r['code']['src_edited'] else ''})"
            for r in runs
        )
        + ". No timings.",
        "",
        "### Quality: MRR@10 exact \\| through the HNSW graph, per candidate "
        f"(✗: more than {KEEPS} below float32)",
        "",
        *quality_table(base),
        "",
        "Largest MRR@10 drop from float32 (over corpora, kinds, dense and hybrid, exact "
        "and graph): " + ", ".join(f"{c} {d:+.4f}" for c, d in verdicts(base).items()) + ".",
        "",
        "### Recall, exact search: R@10 dense / R@10 hybrid (file level) / neighbour "
        "recall@10 (dense, of float32's 10 nearest chunks)",
        "",
        *recall_table(base),
        "",
        "### The stores as written, searched through their own code (MRR@10)",
        "",
        *as_stored_table(runs),
        "",
        "### Size on disk: SQLite (the file as a run leaves it; the HNSW graph a "
        "store keeps beside it from `EXACT_BELOW` chunks on)",
        "",
        *sizes_table(runs),
        "",
        "### The SQLite file by table and index (MB, SQLite's dbstat; those of 40 KB or more)",
        "",
        *parts_table(runs),
        "",
        "### Size on disk: PostgreSQL (the chunks table with its TOAST and indexes)",
        "",
        *postgres_table(runs),
    ]
    text = "\n".join(lines)
    print(text)
    if args.md:
        page = args.md.read_text() if args.md.exists() else ""
        start, end = "<!-- tables: start -->", "<!-- tables: end -->"
        if start in page and end in page:
            page = page.split(start)[0] + start + "\n" + text + "\n" + end + page.split(end)[1]
        else:
            page = f"# Stored vector precision\n\n{start}\n{text}\n{end}\n"
        args.md.write_text(page)
    if args.json:
        args.json.write_text(
            json.dumps({"keeps": KEEPS, "verdicts": verdicts(base), "runs": runs}, indent=1)
        )


def main() -> None:
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--python-docs",
        type=int,
        default=0,
        metavar="N",
        help="add N library pages and the FAQ of Debian's python3-doc",
    )
    ap.add_argument("--per-kind", type=int, default=150)
    ap.add_argument("--store-dir", type=Path, default=ROOT / ".bench" / "vector_precision")
    ap.add_argument(
        "--upgraded-from",
        type=Path,
        metavar="DIR",
        help="also open (and so upgrade) a copy of each corpus's float32 store "
        "in DIR (an earlier revision's --store-dir): its size and answers",
    )
    ap.add_argument(
        "--no-postgres",
        action="store_true",
        help="leave out the PostgreSQL store (sizes and search)",
    )
    ap.add_argument("--out", type=Path, help="write this run's results here")
    ap.add_argument(
        "--report", nargs="+", type=Path, metavar="RUN.json", help="write the page from these runs"
    )
    ap.add_argument("--md", type=Path)
    ap.add_argument("--json", type=Path)
    ARGS = ap.parse_args()
    if ARGS.report:
        report(ARGS)
    elif ARGS.out:
        run(ARGS)
    else:
        ap.error("--out RUN.json or --report RUN.json ...: expected one, got neither")


ARGS: argparse.Namespace

if __name__ == "__main__":
    main()
