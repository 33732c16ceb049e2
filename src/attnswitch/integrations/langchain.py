"""LangChain over attnswitch (the `langchain` extra: `pip install 'attnswitch[langchain]'`).

- `AttnswitchRetriever`: a `BaseRetriever` over an attnswitch index, local (`db=`, a data
  folder, SQLite file or `postgresql://` URL; None is `./.attnswitch/`) or served (`url=`
  of a running `attnswitch serve`, with `api_key=` when it has keys). Fields: `k`, `mode`
  ("hybrid", "dense", "keyword"), the filters of `attnswitch.search` (`path`, `type`,
  `modified_after`, `modified_before`) and `group` ("chunk": the `k` best chunks;
  "document": the best chunk of each of the `k` best documents). Each hit becomes a
  `Document` whose `page_content` is the chunk's text and whose metadata is every other
  field of the hit (`Hit.to_dict()` less `text`: path, root, heading_path, location,
  score, rank, chunk_id, snippet, ..., and `more_in_document`, how many other chunks of
  the document matched when grouped by document, 0 otherwise). Sync (`invoke`) and async (`ainvoke`: httpx's async client for
  `url=`, a worker thread for a local index).
- `AttnswitchEmbeddings`: LangChain's `Embeddings` over attnswitch's engines
  (`attnswitch.encode`: `model`, `engine`, `precision`); vectors are L2-normalised.
- `AttnswitchLoader`: a `BaseLoader` giving attnswitch's reading of a folder or a file
  (every format it reads) as `Document`s, by chunks, blocks or whole documents
  (`integrations.extraction`), with the same metadata names as a hit.

A bad value is refused when the object is built, as pydantic's `ValidationError` naming
the field ("mode: expected one of hybrid, dense, keyword, got 'fuzzy'"). A search that
cannot be made raises `index_client.IndexSearchError`, one line naming what was wrong: a
refusal by the service (`RemoteSearchError`, a `ValueError` too, with the service's
message), an answer that is not a search's answer (not JSON, a missing or wrongly typed
field), or a damaged local index (the line `attnswitch search` prints for it).

    from langchain_core.prompts import ChatPromptTemplate
    from attnswitch.integrations.langchain import AttnswitchRetriever

    retriever = AttnswitchRetriever(db="team-index", k=3, type="html")
    docs = retriever.invoke("how do I update rows in a table")
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from pydantic import BaseModel, ConfigDict, SecretStr, model_validator

from attnswitch.indexing.filters import FIELDS
from attnswitch.indexing.requests import DEFAULT_K, Mode
from attnswitch.integrations import index_client
from attnswitch.integrations.extraction import Extraction


def _document(hit: dict[str, Any]) -> Document:
    return Document(page_content=hit["text"], metadata=index_client.hit_metadata(hit))


class AttnswitchRetriever(BaseRetriever):
    """The `k` chunks of an attnswitch index that best match the query, or with `group`
    "document" the best chunk of each of the `k` best documents, as `Document`s (see the
    module doc)."""

    db: str | os.PathLike | None = None
    url: str | None = None
    api_key: SecretStr | None = None
    k: int = DEFAULT_K
    mode: str = Mode.HYBRID.value
    path: str | list[str] | None = None
    type: str | list[str] | None = None
    modified_after: Any = None
    modified_before: Any = None
    group: str = "chunk"
    timeout: float = index_client.DEFAULT_TIMEOUT_S

    model_config = ConfigDict(arbitrary_types_allowed=True)

    @model_validator(mode="after")
    def _check(self) -> AttnswitchRetriever:
        index_client.check_source(self.db, self.url)
        self._spec()
        return self

    def _spec(self) -> index_client.SearchSpec:
        return index_client.SearchSpec(
            self.k,
            self.mode,
            **{name: getattr(self, name) for name in FIELDS},
            group=self.group,
        )

    def _where(self) -> dict[str, Any]:
        return {
            "db": self.db,
            "url": self.url,
            "timeout": self.timeout,
            "api_key": None if self.api_key is None else self.api_key.get_secret_value(),
        }

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [_document(h) for h in index_client.search(query, self._spec(), **self._where())]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        hits = await index_client.asearch(query, self._spec(), **self._where())
        return [_document(h) for h in hits]


class AttnswitchEmbeddings(BaseModel, Embeddings):
    """Vectors of attnswitch's engines (`attnswitch.encode`): `model` a model folder (None:
    the packaged all-MiniLM-L6-v2), `engine` ("auto" or a registered engine: "torch",
    "openvino", "onnxruntime", ...), `precision` ("auto", "fp32", "bf16", "int8"). Texts
    past the model's limit are truncated; an empty text is refused (`EncodeInputError`, a
    `ValueError`, naming its index)."""

    model: str | None = None
    engine: str = "auto"
    precision: str = "auto"

    model_config = ConfigDict(frozen=True)

    @model_validator(mode="after")
    def _check(self) -> AttnswitchEmbeddings:
        index_client.check_encoder(self.engine, self.precision)
        return self

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return index_client.embed(texts, self.model, self.engine, self.precision)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await asyncio.to_thread(self.embed_query, text)


class AttnswitchLoader(BaseLoader):
    """A folder or a file read by attnswitch, as `Document`s `by` "chunks" (what `attnswitch
    run` indexes), "blocks" or "documents" (see `integrations.extraction`). `skipped`
    lists (path, reason) of the files that gave no text, once loaded. `ocr`: read scanned
    pages and images with Tesseract."""

    def __init__(self, path: str | os.PathLike, *, by: str = "chunks", ocr: bool = True):
        self._extraction = Extraction(path, by, ocr)

    @property
    def skipped(self) -> list[tuple[str, str]]:
        return self._extraction.skipped

    def lazy_load(self) -> Iterator[Document]:
        for text, metadata in self._extraction.pieces():
            yield Document(page_content=text, metadata=metadata)


__all__ = ["AttnswitchEmbeddings", "AttnswitchLoader", "AttnswitchRetriever"]
