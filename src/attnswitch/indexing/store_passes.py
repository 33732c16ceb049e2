"""What both stores do the same way for the two passes (docs/architecture.md, "Two passes"):
a chunk may hold a quick vector (the static model's, written with it by the quick pass), a
full vector (the transformer's, filled in behind by the full pass or by a search), or both.

`VectorPasses` is mixed into both stores, over their connection and two hooks:
`_packed(row)` (a float16 row as the store's driver writes it) and `_hold_dim(conn, dim)`
(the store's one dimension of full vectors, set by the first and enforced after). It gives
- `coverage()`: chunks, and how many have each kind of vector;
- `unencoded(limit)`: chunks without a full vector, of the most recently modified
  documents first, each document whole (the full pass's queue);
- `fill_vectors(ids, keys, vectors)`: full vectors written in place where a chunk has none
  and still has the text they were made of (its vector key), one transaction a call.
  A fill changes nothing but those vectors, and any number may run beside the run that
  holds the run lock (the full pass, and searches that encode their best candidates): a
  chunk deleted, re-chunked or filled meanwhile is left alone;
- `quick_model()` / `set_quick_model()`: which static model made the stored quick vectors
  (meta "quick": its provenance key and dimension), so a query is encoded by the same one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from attnswitch.indexing.records import Coverage, DocumentTotals, Unencoded
from attnswitch.indexing.store_base import checked_vectors, stored_form
from attnswitch.indexing.store_errors import StoreInputError

QUICK_META = "quick"
# Documents looked at per `unencoded` call: the chunks returned are theirs.
UNENCODED_DOCUMENTS = 256


class VectorPasses:
    """The two passes' reads and writes (see the module doc), for a store that provides
    `_read`, `_transaction`, `meta`/`set_meta`, `_mark`, `_vector_column`, `_packed` and
    `_hold_dim`. Mixed in after `StoreBase` (`class SQLiteStore(StoreBase, VectorPasses)`)."""

    _mark: ClassVar[str]
    _vector_column: ClassVar[str]
    # more of a filled chunk's columns set with its vector, as SQL (", column = value")
    _filled_with: ClassVar[str] = ""

    # -- hooks of the store (`StoreBase` and the store's own) ---------------------------

    if TYPE_CHECKING:

        def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
        def _transaction(self) -> AbstractContextManager[Any]: ...
        def meta(self, key: str) -> str | None: ...
        def set_meta(self, key: str, value: str) -> None: ...

    def _packed(self, row: np.ndarray) -> Any:
        """One stored-form (float16) vector as the store's driver writes it."""
        raise NotImplementedError

    def _hold_dim(self, conn: Any, dim: int) -> None:
        """Set the store's full-vector dimension to `dim` when it has none; refuse another
        one while full vectors are stored (`StoreInputError` naming `vectors`)."""
        raise NotImplementedError

    # -- reads ---------------------------------------------------------------------------

    def coverage(self) -> Coverage:
        """How many chunks are stored, and how many have a quick and a full vector (one
        scan of the chunks)."""
        v = self._vector_column
        ((chunks, quick, full, tokens),) = self._read(
            f"SELECT COUNT(*), COUNT(quick), COUNT({v}), "
            f"COALESCE(SUM(CASE WHEN {v} IS NULL THEN n_tokens ELSE 0 END), 0) FROM chunks"
        )
        return Coverage(int(chunks), int(quick), int(full), int(tokens))

    def totals_of(self, documents: Sequence[int]) -> DocumentTotals:
        """What the indexed documents `documents` (ids) hold: their count, tokens, bytes,
        folders, and their chunks' coverage (three statements over those ids only)."""
        wanted = sorted({int(i) for i in documents})
        if not wanted:
            return DocumentTotals(0, 0, 0, (), Coverage(0, 0, 0, 0))
        condition, params = self._id_list(wanted)
        v = self._vector_column
        ((count, tokens, size),) = self._read(
            "SELECT COUNT(*), COALESCE(SUM(n_tokens), 0), COALESCE(SUM(size), 0) FROM "
            f"documents WHERE status = 'indexed' AND id {condition}",
            params,
        )
        roots = self._read(
            f"SELECT DISTINCT root FROM documents WHERE status = 'indexed' AND id {condition} "
            "ORDER BY root",
            params,
        )
        ((chunks, quick, full, unencoded),) = self._read(
            f"SELECT COUNT(*), COUNT(quick), COUNT({v}), "
            f"COALESCE(SUM(CASE WHEN {v} IS NULL THEN n_tokens ELSE 0 END), 0) FROM chunks "
            f"WHERE doc_id {condition}",
            params,
        )
        return DocumentTotals(
            int(count),
            int(tokens),
            int(size),
            tuple(r[0] for r in roots),
            Coverage(int(chunks), int(quick), int(full), int(unencoded)),
        )

    def unencoded_count(self) -> int:
        """How many chunks have no full vector yet (an index of those only: cheap when few)."""
        ((n,),) = self._read(f"SELECT COUNT(*) FROM chunks WHERE {self._vector_column} IS NULL")
        return int(n)

    def unencoded(self, limit: int) -> list[Unencoded]:
        """Up to `limit` chunks without a full vector: those of the `UNENCODED_DOCUMENTS`
        most recently modified documents that have any, newest document first, each
        document's in order."""
        m, v = self._mark, self._vector_column
        rows = self._read(
            "SELECT c.id, c.prefix, c.text, c.vector_key, c.n_tokens FROM chunks c JOIN ("
            "SELECT d.id, d.mtime_ns FROM documents d WHERE d.status = 'indexed' AND EXISTS "
            f"(SELECT 1 FROM chunks u WHERE u.doc_id = d.id AND u.{v} IS NULL) "
            f"ORDER BY d.mtime_ns DESC, d.id LIMIT {m}) p ON p.id = c.doc_id "
            f"WHERE c.{v} IS NULL ORDER BY p.mtime_ns DESC, p.id, c.ordinal LIMIT {m}",
            (UNENCODED_DOCUMENTS, int(limit)),
        )
        return [Unencoded(int(r[0]), (r[1] or "") + r[2], r[3], int(r[4])) for r in rows]

    def unencoded_among(self, ids: Sequence[int]) -> list[Unencoded]:
        """Those of the chunks `ids` that have no full vector (any order)."""
        wanted = sorted({int(i) for i in ids})
        if not wanted:
            return []
        condition, params = self._id_list(wanted)
        rows = self._read(
            "SELECT id, prefix, text, vector_key, n_tokens FROM chunks WHERE "
            f"{self._vector_column} IS NULL AND id {condition}",
            params,
        )
        return [Unencoded(int(r[0]), (r[1] or "") + r[2], r[3], int(r[4])) for r in rows]

    def unencoded_of(self, doc_id: int) -> list[Unencoded]:
        """The chunks of document `doc_id` that have no full vector, in order."""
        m = self._mark
        rows = self._read(
            "SELECT id, prefix, text, vector_key, n_tokens FROM chunks WHERE "
            f"doc_id = {m} AND {self._vector_column} IS NULL ORDER BY ordinal",
            (int(doc_id),),
        )
        return [Unencoded(int(r[0]), (r[1] or "") + r[2], r[3], int(r[4])) for r in rows]

    def _id_list(self, ids: list[int]) -> tuple[str, tuple[Any, ...]]:
        """`IN` a list of ids as SQL and its one parameter: SQLite's form (`json_each`);
        `PostgresStore` has its own (`= ANY`)."""
        return f"IN (SELECT value FROM json_each({self._mark}))", (json.dumps(ids),)

    def quick_model(self) -> dict[str, Any] | None:
        """The static model of the stored quick vectors: {"fingerprint", "dim"}, or None
        when none are stored."""
        value = self.meta(QUICK_META)
        if value is None:
            return None
        try:
            model = json.loads(value)
        except ValueError:
            return None
        return model if isinstance(model, dict) else None

    def expect_dim(self, dim: int) -> None:
        """Told the full vectors' dimension `dim` before the first is written
        (`Store.expect_dim`). Nothing to prepare in SQLite, whose vector column has no
        type; `PostgresStore` types its column."""

    def set_quick_model(self, fingerprint: str, dim: int) -> None:
        """Record the static model whose quick vectors are written from now on. Quick
        vectors of another model are dropped first (a query could not be compared with
        them), in the same transaction."""
        current = self.quick_model()
        if current == {"fingerprint": fingerprint, "dim": int(dim)}:
            return
        with self._transaction() as conn:
            if current is not None:
                conn.execute("UPDATE chunks SET quick = NULL WHERE quick IS NOT NULL")
        self.set_meta(QUICK_META, json.dumps({"fingerprint": fingerprint, "dim": int(dim)}))

    # -- writes --------------------------------------------------------------------------

    def fill_vectors(self, ids: Sequence[int], keys: Sequence[str | None], vectors: Any) -> int:
        """Write the full vectors `vectors` (`[len(ids), dim]`, L2-normalised here) of the
        chunks `ids`, each only where the chunk has none and its vector key is still
        `keys[i]`; one transaction. How many were written."""
        if len(keys) != len(ids):
            raise StoreInputError("keys", f"one vector key per chunk id ({len(ids)})", len(keys))
        matrix = checked_vectors(vectors, len(ids))
        if not len(ids):
            return 0
        stored = stored_form(matrix)
        m, v = self._mark, self._vector_column
        written = 0
        with self._transaction() as conn:
            self._hold_dim(conn, matrix.shape[1])
            for i, (chunk_id, key) in enumerate(zip(ids, keys, strict=True)):
                written += conn.execute(
                    f"UPDATE chunks SET {v} = {m}{self._filled_with} WHERE id = {m} AND "
                    f"{v} IS NULL AND "
                    f"vector_key IS NOT DISTINCT FROM {m}",
                    (self._packed(stored[i]), int(chunk_id), key),
                ).rowcount
        return written


def checked_quick(quick: Any, n: int, dim: int | None) -> np.ndarray | None:
    """Quick vectors given with `n` chunks as float32 `[n, dim]` (no copy of a float32
    array), checked: None (none), else a numeric array of that shape, finite."""
    if quick is None:
        return None
    try:
        matrix = np.asarray(quick, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise StoreInputError(
            "quick", "a numeric array", f"{type(quick).__name__} ({exc})"
        ) from None
    if matrix.ndim != 2 or matrix.shape[0] != n or (dim is not None and matrix.shape[1] != dim):
        want = f"[{n}, {dim if dim is not None else 'dim'}]"
        raise StoreInputError("quick", f"shape {want} (one row per chunk)", list(matrix.shape))
    if not np.isfinite(matrix).all():
        raise StoreInputError("quick", "finite values", "NaN or inf")
    return matrix


def stored_quick(matrix: np.ndarray) -> np.ndarray:
    """`checked_quick`'s rows as stored: float16, each unit length or zero (a chunk with no
    token the static model knows)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return stored_form(np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0))


__all__ = [
    "QUICK_META",
    "UNENCODED_DOCUMENTS",
    "VectorPasses",
    "checked_quick",
    "stored_quick",
]
