"""What both stores do with the documents' recorded permissions (`StoreAccess`, a part of
`store_base.StoreBase`): keep each distinct chain once (the `access` table: `signature`,
`chain` JSON), point each document at its chain (its `access` column), bring that
pointer up to date without reading the file again (`refresh_access`), and keep a
reader's search to what it may read (`allowed_documents`, `may_read`; indexing/access.py
says the rules). Documents without a recorded chain (NULL) are read by admins only."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from attnswitch.indexing.access import Reader, readable
from attnswitch.indexing.filters import SearchFilter
from attnswitch.indexing.records import root_key

if TYPE_CHECKING:
    from attnswitch.documents.permissions import Access

# Documents found by their chain (the SQL half of a reader's filter), made once the column
# exists (schema version 11).
ACCESS_INDEX = "CREATE INDEX IF NOT EXISTS documents_access ON documents (access)"
ACCESS_TABLE = "CREATE TABLE IF NOT EXISTS access (signature TEXT PRIMARY KEY, chain TEXT NOT NULL)"


class StoreAccess:
    """The recorded permissions of a store's documents (see the module doc), over the
    store's `_mark`, `_read`, `_transaction`, `_retrying`, `_pairs` and `_check_deadline`
    (`store_base.StoreBase`'s)."""

    _mark: ClassVar[str]
    # SQL that is true when two values differ, NULL counting as a value
    _differs: ClassVar[str] = "IS NOT"
    _read: Any
    _transaction: Any
    _retrying: Any
    _pairs: Any
    _check_deadline: Any

    def _keep_access(self, conn: Any, access: Access | None) -> str | None:
        """Record `access`'s chain (once for all the documents that share it) inside the
        caller's transaction; its signature, None for None."""
        if access is None:
            return None
        m = self._mark
        conn.execute(
            f"INSERT INTO access (signature, chain) VALUES ({m}, {m}) "
            "ON CONFLICT (signature) DO NOTHING",
            (access.signature, access.to_json()),
        )
        return access.signature

    def refresh_access(
        self, root: str | os.PathLike[str], accesses: Mapping[str, Access | None]
    ) -> int:
        """Give the stored documents of `root` named in `accesses` (source -> its access
        now, as `documents.permissions.of` reads it; None: not known, left as stored) their
        chain, in one transaction; nothing is read, chunked or encoded. Returns how many
        documents' access changed."""
        known = {s: a for s, a in accesses.items() if a is not None}
        if not known:
            return 0
        m, key = self._mark, root_key(root)
        pairs = sorted((source, access.signature) for source, access in known.items())
        chains = {a.signature: a for a in known.values()}

        def refresh() -> int:
            with self._transaction() as conn:
                for access in chains.values():
                    self._keep_access(conn, access)
                table, params = self._pairs(pairs)
                return int(
                    conn.execute(
                        f"UPDATE documents SET access = p.b FROM {table} p WHERE "
                        f"documents.root = {m} AND documents.source = p.a AND "
                        f"documents.access {self._differs} p.b",
                        (*params, key),
                    ).rowcount
                )

        return int(self._retrying(refresh))

    def prune_access(self, conn: Any) -> None:
        """Drop the chains no document names any more (a chmod left them behind), inside
        the caller's transaction."""
        conn.execute(
            "DELETE FROM access WHERE NOT EXISTS (SELECT 1 FROM documents d "
            "WHERE d.access = access.signature)"
        )

    def readable_signatures(self, reader: Reader) -> set[str]:
        """The signatures of the stored chains `reader` may read (`access.readable`: each
        distinct chain judged once)."""
        return readable(reader, self._read("SELECT signature, chain FROM access"))

    def _in_list(self, column: str, values: Sequence[str]) -> tuple[str, list[Any]]:
        """SQL true when `column` is one of `values`, with its parameters (one for any
        number of values). SQLite's form (`json_each`); `PostgresStore` has its own."""
        return (
            f"{column} IN (SELECT value FROM json_each({self._mark}))",
            [json.dumps(list(values))],
        )

    def allowed_documents(self, where: SearchFilter) -> list[int]:
        """The ids of the indexed documents `where` keeps (`filters.SearchFilter`): kinds
        and times checked by SQL, paths and extensions here, on the rows SQL kept, each
        after a look at the clock under a `deadline`. With a reader, only those it may
        read: the chains it may read are judged first, then SQL keeps their documents
        (all of them are looked at here when the reader has grants, which are paths)."""
        conditions, params = where.sql(self._mark)
        readable_now: set[str] | None = None
        grants = where.reader is not None and bool(where.reader.granted)
        if where.reader is not None:
            readable_now = self.readable_signatures(where.reader)
            if not grants:
                if not readable_now:
                    return []
                condition, values = self._in_list("d.access", sorted(readable_now))
                conditions, params = f"{conditions} AND {condition}", params + values
        rows = self._read(
            f"SELECT d.id, d.root, d.source, d.kind, d.access FROM documents d "
            f"WHERE {conditions} ORDER BY d.id",
            params,
        )
        allowed = []
        for r in rows:  # a filter of many paths can cost milliseconds a document
            self._check_deadline()
            if not where.matches(r[1], r[2], r[3]):
                continue
            if grants and r[4] not in (readable_now or ()) and not where.granted(r[1], r[2]):
                continue
            allowed.append(int(r[0]))
        return allowed

    def may_read(self, reader: Reader | None, document_id: int) -> bool:
        """Whether `reader` (None: an admin) may read the indexed document `document_id`
        (False when no such document is indexed)."""
        rows = self._read(
            "SELECT d.root, d.source, a.chain, d.access FROM documents d LEFT JOIN access a "
            f"ON a.signature = d.access WHERE d.id = {self._mark} AND d.status = 'indexed'",
            (document_id,),
        )
        if not rows:
            return False
        root, source, chain, signature = rows[0]
        if reader is None:
            return True
        if chain is not None and readable(reader, [(signature, chain)]):
            return True
        where = SearchFilter.for_reader(None, reader)
        return where is not None and where.granted(root, source)


__all__ = ["ACCESS_INDEX", "ACCESS_TABLE", "StoreAccess"]
