"""LlamaIndex over attnswitch (the `llamaindex` extra: `pip install 'attnswitch[llamaindex]'`).

- `AttnswitchRetriever`: a `BaseRetriever` over an attnswitch index, local (`db=`) or
  served (`url=` of a running `attnswitch serve`, `api_key=` when it has keys), with `k`,
  `mode`, the filters of `attnswitch.search` (`path`, `type`, `modified_after`,
  `modified_before`) and `group` ("chunk": the `k` best chunks; "document": the best
  chunk of each of the `k` best documents). Each hit is a `NodeWithScore` (score: the
  hit's) of a `TextNode` whose id is "attnswitch-chunk-<chunk_id>", whose text is the
  chunk's and whose metadata is every other field of the hit (`Hit.to_dict()` less
  `text`, with `more_in_document`: how many other chunks of the document matched when
  grouped by document, 0 otherwise). Only `path` and
  `heading_path` go into what the LLM reads with the text, and no metadata into what an
  embedding model reads. Sync (`retrieve`) and async (`aretrieve`).
- `AttnswitchEmbedding`: a `BaseEmbedding` over attnswitch's engines (`model`, `engine`,
  `precision`), queries and texts alike (the default model has no query prefix), sync and
  async.
- `AttnswitchReader`: a `BaseReader` giving attnswitch's reading of a folder or a file as
  `Document`s by chunks, blocks or whole documents (`integrations.extraction`).

A bad value is refused when the object is built: pydantic's `ValidationError` for the
embedding (a pydantic model in LlamaIndex), `ValueError` naming the argument for the
retriever and the reader (plain classes in LlamaIndex), e.g. "mode: expected one of
hybrid, dense, keyword, got 'fuzzy'". A search that cannot be made raises
`index_client.IndexSearchError`, one line naming what was wrong: a refusal by the service
(`RemoteSearchError`, a `ValueError` too, with the service's message), an answer that is
not a search's answer (not JSON, a missing or wrongly typed field), or a damaged local
index (the line `attnswitch search` prints for it).

    from llama_index.core.query_engine import RetrieverQueryEngine
    from attnswitch.integrations.llamaindex import AttnswitchRetriever

    engine = RetrieverQueryEngine.from_args(AttnswitchRetriever(db="team-index", k=3), llm=llm)
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.readers.base import BaseReader
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import Document, NodeWithScore, QueryBundle, TextNode
from pydantic import model_validator

from attnswitch.indexing.requests import DEFAULT_K, Mode
from attnswitch.integrations import index_client
from attnswitch.integrations.extraction import Extraction

# The metadata an LLM reads with a chunk's text; the rest stays out of its prompt.
LLM_METADATA = ("path", "heading_path")


def _node(hit: dict[str, Any]) -> NodeWithScore:
    metadata = index_client.hit_metadata(hit)
    node = TextNode(
        id_=f"attnswitch-chunk-{hit['chunk_id']}",
        text=hit["text"],
        metadata=metadata,
        excluded_llm_metadata_keys=[m for m in metadata if m not in LLM_METADATA],
        excluded_embed_metadata_keys=list(metadata),
    )
    return NodeWithScore(node=node, score=float(hit["score"]))


class AttnswitchRetriever(BaseRetriever):
    """The `k` chunks of an attnswitch index that best match the query, or with `group`
    "document" the best chunk of each of the `k` best documents (see the module doc)."""

    def __init__(
        self,
        db: str | os.PathLike | None = None,
        *,
        url: str | None = None,
        api_key: str | None = None,
        k: int = DEFAULT_K,
        mode: str = Mode.HYBRID.value,
        path: str | list[str] | None = None,
        type: str | list[str] | None = None,
        modified_after: Any = None,
        modified_before: Any = None,
        group: str = "chunk",
        timeout: float = index_client.DEFAULT_TIMEOUT_S,
        **kwargs: Any,
    ):
        index_client.check_source(db, url)
        self._spec = index_client.SearchSpec(
            k,
            mode,
            path=path,
            type=type,
            modified_after=modified_after,
            modified_before=modified_before,
            group=group,
        )
        self._where = {"db": db, "url": url, "api_key": api_key, "timeout": timeout}
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = index_client.search(query_bundle.query_str, self._spec, **self._where)
        return [_node(h) for h in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = await index_client.asearch(query_bundle.query_str, self._spec, **self._where)
        return [_node(h) for h in hits]


class AttnswitchEmbedding(BaseEmbedding):
    """Vectors of attnswitch's engines (`attnswitch.encode`): `model` a model folder (None:
    the packaged all-MiniLM-L6-v2), `engine` ("auto" or a registered engine), `precision`
    ("auto", "fp32", "bf16", "int8"); L2-normalised."""

    model: str | None = None
    engine: str = "auto"
    precision: str = "auto"
    model_name: str = "attnswitch"

    @model_validator(mode="after")
    def _check(self) -> AttnswitchEmbedding:
        index_client.check_encoder(self.engine, self.precision)
        return self

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return index_client.embed(texts, self.model, self.engine, self.precision)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


class AttnswitchReader(BaseReader):
    """A folder or a file read by attnswitch, as LlamaIndex `Document`s `by` "chunks",
    "blocks" or "documents" (see `integrations.extraction`); `skipped` lists (path,
    reason) of the files that gave no text, after a load."""

    def __init__(self, *, by: str = "chunks", ocr: bool = True):
        Extraction(".", by, ocr)  # checks `by` now
        self.by, self.ocr = by, ocr
        self.skipped: list[tuple[str, str]] = []

    def lazy_load_data(self, path: str | os.PathLike, **kwargs: Any) -> Any:
        extraction = Extraction(path, self.by, self.ocr, self.skipped)
        for text, metadata in extraction.pieces():
            yield Document(
                text=text,
                metadata=metadata,
                excluded_llm_metadata_keys=[m for m in metadata if m not in LLM_METADATA],
                excluded_embed_metadata_keys=list(metadata),
            )

    def load_data(self, path: str | os.PathLike, **kwargs: Any) -> list[Document]:
        return list(self.lazy_load_data(path, **kwargs))


__all__ = ["AttnswitchEmbedding", "AttnswitchReader", "AttnswitchRetriever"]
