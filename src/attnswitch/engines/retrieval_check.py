"""A small built-in retrieval check: does a precision keep what search returns?

Six topics of ten short passages each (`PASSAGES`), and one query per topic (`QUERIES`).
Every query's ten nearest passages under the reference (float32) vectors should be its own
topic's ten: the topics are far apart, so the gap between the 10th and the 11th passage is
wide and an honest rounding error cannot cross it, while vectors damaged by a precision
(a broken quantisation, a lost scale) reorder the corpus and change the top 10. The passages
are also real text for calibrating static int8 quantisation (`calibration_corpus`).

`top10_agreement(ref_passages, ref_queries, got_passages, got_queries)` is the fraction of
queries whose top-10 set of passages is the same under both sets of vectors (1.0: all).
The texts were written for this check; they are fixed, so the check is deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

K = 10

TOPICS: Mapping[str, tuple[str, tuple[str, ...]]] = MappingProxyType(
    {
        "sql": (
            "how a SQL database plans a query with an index over table rows",
            (
                "A B-tree index lets the database find matching rows without reading the whole table.",
                "The query planner compares the cost of an index scan with a sequential scan.",
                "A composite index on two columns helps queries that filter on the leading column.",
                "Run EXPLAIN ANALYZE to see which plan the database chose for a SELECT statement.",
                "Updating a row also updates every index defined on the table, so writes get slower.",
                "A unique index rejects an INSERT that would duplicate an existing key.",
                "Vacuuming reclaims the space left by deleted rows in PostgreSQL tables.",
                "Join order matters: the planner starts from the table with the fewest matching rows.",
                "A covering index holds every column the query reads, so the table is not visited.",
                "Statistics about column values let the optimizer estimate how selective a filter is.",
            ),
        ),
        "bread": (
            "how to bake bread at home with flour, water, yeast and salt",
            (
                "Knead the dough for ten minutes until it is smooth and springs back when pressed.",
                "Let the dough rise in a warm place until it has doubled in size.",
                "A sourdough starter is a mix of flour and water fermented by wild yeast.",
                "Bake the loaf in a hot oven with steam so that the crust can expand before it sets.",
                "Whole wheat flour absorbs more water than white flour, so add a little more water.",
                "Shape the loaf gently to keep the gas bubbles that the yeast produced.",
                "Salt tightens the gluten and slows the yeast, so weigh it carefully.",
                "Tap the bottom of the baked loaf: a hollow sound means the bread is done.",
                "Let the bread cool on a rack before slicing, or the crumb turns gummy.",
                "Proofing the dough overnight in the fridge gives the bread more flavour.",
            ),
        ),
        "network": (
            "computer networks: TCP, UDP and IP packets, routers, DNS, firewalls and latency",
            (
                "TCP opens a connection with a three-way handshake of SYN, SYN-ACK and ACK segments.",
                "A router forwards IP packets toward their destination using its routing table.",
                "Lost segments are retransmitted when the sender's timer expires without an ACK.",
                "The congestion window limits how much data TCP sends before waiting for acks.",
                "DNS translates a host name into the IP address that packets are sent to.",
                "A firewall drops incoming packets that do not match an allowed port and protocol.",
                "UDP sends datagrams without a connection and without retransmission.",
                "Network address translation lets many hosts share one public IPv4 address.",
                "The maximum transmission unit bounds the size of a packet on a link.",
                "Latency is the time a packet takes to cross the network from sender to receiver.",
            ),
        ),
        "garden": (
            "gardening: growing tomatoes, beans and carrots in garden beds, soil, watering, pests",
            (
                "Tomatoes need at least six hours of direct sunlight every day to fruit well.",
                "Water the vegetable beds deeply in the early morning rather than every evening.",
                "Compost adds organic matter that helps sandy soil hold water and nutrients.",
                "Sow carrot seeds thinly and thin the seedlings so the roots have room to grow.",
                "Mulch around the plants keeps weeds down and the soil moist in summer.",
                "Rotate crops each year so that pests and diseases do not build up in the soil.",
                "Prune the side shoots of the tomato plants to get larger fruit.",
                "Plant beans after the last frost, when the soil has warmed up in spring.",
                "Aphids on the leaves can be washed off with water or eaten by ladybirds.",
                "Raised beds drain well and warm up earlier in the spring than the ground.",
            ),
        ),
        "git": (
            "how to use git branches, commits and merges in version control",
            (
                "git commit records a snapshot of the staged changes with a message.",
                "Create a branch with git switch -c to work on a feature apart from main.",
                "A merge joins the histories of two branches and may stop at conflicts to resolve.",
                "git rebase replays your commits on top of another branch for a linear history.",
                "git log shows the commit history, newest first, with authors and messages.",
                "Stage only part of a file with git add -p before committing it.",
                "git push sends your local commits to the branch on the remote repository.",
                "Resolve a merge conflict by editing the marked lines, then add the file and commit.",
                "git revert makes a new commit that undoes the changes of an earlier commit.",
                "A pull request asks the maintainers to review and merge your branch.",
            ),
        ),
        "health": (
            "human health: sleep, exercise, muscles, diet, sugar, water and the heart",
            (
                "Adults need seven to nine hours of sleep a night to stay alert and healthy.",
                "Regular aerobic exercise strengthens the heart and lowers blood pressure.",
                "A diet rich in vegetables, fruit and fibre lowers the risk of heart disease.",
                "Drinking enough water keeps the body hydrated during exercise and hot weather.",
                "Strength training twice a week keeps muscles and bones strong with age.",
                "Too much sugar in the diet raises the risk of type 2 diabetes.",
                "Caffeine late in the day makes it harder to fall asleep at night.",
                "Walking for thirty minutes a day improves mood and fitness.",
                "Stretching after exercise helps the muscles recover and stay flexible.",
                "A regular bedtime helps the body keep a steady sleep rhythm.",
            ),
        ),
    }
)

PASSAGES: tuple[str, ...] = tuple(p for _, passages in TOPICS.values() for p in passages)
QUERIES: tuple[str, ...] = tuple(query for query, _ in TOPICS.values())


def calibration_corpus() -> list[str]:
    """The passages and queries: short real text to calibrate a static quantisation on."""
    return [*PASSAGES, *QUERIES]


def top_k(passages: np.ndarray, queries: np.ndarray, k: int = K) -> list[frozenset[int]]:
    """The indices of each query's `k` nearest passages by cosine (as sets)."""
    p = passages / np.linalg.norm(passages, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    scores = q.astype(np.float64) @ p.astype(np.float64).T
    return [frozenset(np.argsort(-row, kind="stable")[:k].tolist()) for row in scores]


def top10_agreement(
    ref_passages: np.ndarray,
    ref_queries: np.ndarray,
    got_passages: np.ndarray,
    got_queries: np.ndarray,
) -> float:
    """The fraction of queries whose top-10 passages (as a set) are the same under the
    candidate vectors as under the reference ones."""
    ref = top_k(ref_passages, ref_queries)
    got = top_k(got_passages, got_queries)
    return sum(a == b for a, b in zip(ref, got, strict=True)) / len(ref)


__all__ = ["K", "PASSAGES", "QUERIES", "TOPICS", "calibration_corpus", "top10_agreement", "top_k"]
