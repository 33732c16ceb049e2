"""Hybrid's two guards on the fused list (`search.search`, mode hybrid), and the
grouping of results by document.

- Keyword's finds kept (`keep_keyword_finds`): the keyword list's first `KEYWORD_KEPT`
  chunks that the dense list does not hold at all (dense has nothing for them: not among
  its best `max(k, CANDIDATES)`) and whose keyword score leads every chunk the dense list
  does hold by `KEYWORD_LEAD` times are placed no lower than rank `KEPT_AT` of the fused
  list, in keyword order. Without it, such a chunk scores at most the keyword part's
  weight (0.2), under every chunk the dense list finds half-close, and falls out of the
  top 10: "arbitrary precision calculator" found bc's README first by its words (BM25
  1.49 times the best chunk dense found, a `decimal` FAQ entry) and not at all in hybrid,
  under ten chunks of Python's `decimal` page. The lead is what says dense missed
  something: where dense's own candidates match the words about as well (1.00 to 1.30
  times, six held-out python-docs queries of docs/results/result_grouping_quality.md),
  the keyword list's first place is BM25's noise, and moving it up put it above the
  answer.
- Spread (`spread`): a document's chunks after its first `PER_DOCUMENT` rank after every
  other document's first `PER_DOCUMENT` (then its next `PER_DOCUMENT`, and so on), so one
  long page does not fill the top 10 when other documents match ("give machines IP
  addresses automatically" found `ipaddress.html` ten times; the DHCP page was 5th).
- By document (`group="document"`): only the best chunk of each document, with how many
  other chunks of it the lists held (`Hit.more_in_document`).

A document is its content (copies are one document: `search.distinct_documents`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from attnswitch.indexing.store_errors import StoreInputError

KEYWORD_KEPT = 2
KEYWORD_LEAD = 1.4
KEPT_AT = 3
PER_DOCUMENT = 2
GROUPS = ("chunk", "document")


def check_group(group: object) -> str:
    """`group` as one of `GROUPS` (None: "chunk"), else `StoreInputError` naming it."""
    if group is None:
        return "chunk"
    if group not in GROUPS:
        raise StoreInputError("group", f"one of {', '.join(GROUPS)}", repr(group))
    return str(group)


def keep_keyword_finds(
    fused: list[tuple[int, float]],
    dense: Sequence[tuple[int, float]],
    keyword: Sequence[tuple[int, float]],
    kept: int = KEYWORD_KEPT,
    at: int = KEPT_AT,
    lead: float = KEYWORD_LEAD,
) -> list[tuple[int, float]]:
    """`fused` (chunk id, score) with each of the first `kept` chunks of `keyword`
    ((chunk id, score), higher is better) that `dense` lacks and that score at least
    `lead` times the best keyword score of a chunk `dense` holds (any, when it holds
    none) moved up to rank `at` (from 1) when it ranks lower, in keyword order (the first
    of them above the second); its score is kept (a list's scores need not descend after
    this). Chunks already at `at` or above do not move."""
    in_dense = {cid for cid, _ in dense}
    held = max((score for cid, score in keyword if cid in in_dense), default=0.0)
    finds = [cid for cid, score in keyword[:kept] if cid not in in_dense and score >= lead * held]
    order = [cid for cid, _ in fused]
    place = {cid: i for i, cid in enumerate(order)}
    moved = [cid for cid in finds if cid in place and place[cid] >= at]
    if not moved:
        return fused
    score = dict(fused)
    rest = [cid for cid in order if cid not in moved]
    head = rest[: at - 1]
    return [(cid, score[cid]) for cid in (*head, *moved, *rest[at - 1 :])]


def spread(ranked: Sequence[tuple[int, Hashable]], per_document: int = PER_DOCUMENT) -> list[int]:
    """The positions of `ranked` ((chunk id, its document's key) in rank order) reordered:
    each document's chunks in rounds of `per_document`, every document's first round
    before any second round, each round in rank order."""
    seen: dict[Hashable, int] = {}
    rounds = []
    for i, (_, doc) in enumerate(ranked):
        n = seen.get(doc, 0)
        seen[doc] = n + 1
        rounds.append((n // per_document, i))
    return [i for _, i in sorted(rounds)]
