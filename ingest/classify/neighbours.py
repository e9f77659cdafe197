"""The similarity stage's nearest-neighbour index: exact cosine search with numpy over the
`UrlVector` rows of one tenant and embedding model.

Why exact search in numpy, not an extension or an ANN library: pgvector is not installed on the
PostgreSQL servers this project targets (`pg_available_extensions` lists no `vector`) and SQLite
has no vector type, while the index must work on both; an HNSW graph (hnswlib, usearch) would
have to be rebuilt or kept in step across worker processes. Vectors live in the ledger as
float32 bytes, so every process reads the same index; each process keeps a matrix of them in
memory and catches up by id before a search (one indexed query for the rows added since). A
search is one matrix-vector product, well under the cost of the embedding itself
(bench/rankdisco_classify.py measures the stage; docs/pipelines.md has the figure).

Rows are never updated in place (a URL's vector is fixed by its text and the model), so
following the table by id sees every row.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ingest.classify.models import UrlVector
from ingest.classify.result import Neighbour

__all__ = ["VectorIndex", "index_cache_clear", "nearest"]

TOP_K = 3


class VectorIndex:
    """One (tenant, model)'s vectors in memory, grown by doubling as rows are added."""

    def __init__(self, tenant: str, model: str) -> None:
        self.tenant = tenant
        self.model = model
        self.last_id = 0
        self.size = 0
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        self.hashes: list[str] = []
        self.urls: list[str] = []
        self.labels: list[dict[str, object]] = []
        self.lock = threading.Lock()

    def _append(self, rows: Sequence[tuple[int, str, str, int, Any, Any]]) -> None:
        dim = rows[0][3]
        if self.size == 0:
            self.matrix = np.zeros((max(64, len(rows)), dim), dtype=np.float32)
        needed = self.size + len(rows)
        if needed > self.matrix.shape[0]:
            grown = np.zeros((max(needed, 2 * self.matrix.shape[0]), self.matrix.shape[1]), dtype=np.float32)
            grown[: self.size] = self.matrix[: self.size]
            self.matrix = grown
        for row_id, url_hash, url, row_dim, blob, labels in rows:
            if row_dim != self.matrix.shape[1]:
                continue  # a vector of another size cannot be compared (the model changed its dim)
            self.matrix[self.size] = np.frombuffer(bytes(blob), dtype="<f4")
            self.hashes.append(url_hash)
            self.urls.append(url)
            self.labels.append(labels)
            self.size += 1
            self.last_id = max(self.last_id, row_id)
        self.last_id = max(self.last_id, rows[-1][0])

    def catch_up(self) -> None:
        rows = list(
            UrlVector.objects.filter(tenant=self.tenant, model=self.model, id__gt=self.last_id)
            .order_by("id").values_list("id", "url_hash", "url", "dim", "vector", "labels")
        )  # fmt: skip
        if rows:
            self._append(rows)

    def search(self, vector: Sequence[float], *, k: int = TOP_K, exclude: str = "") -> list[Neighbour]:
        """The `k` nearest vectors by cosine, best first; `exclude` leaves out a URL's own row."""
        with self.lock:
            self.catch_up()
            if self.size == 0:
                return []
            query = np.asarray(vector, dtype=np.float32)
            if query.shape[0] != self.matrix.shape[1]:
                return []
            norm = float(np.linalg.norm(query))
            if norm == 0.0:
                return []
            scores = self.matrix[: self.size] @ (query / norm)
            wanted = min(self.size, k + 1)
            top = np.argpartition(-scores, wanted - 1)[:wanted]
            ranked = sorted(top.tolist(), key=lambda i: (-float(scores[i]), i))
            found = [Neighbour(self.urls[i], float(scores[i]), self.labels[i])
                     for i in ranked if self.hashes[i] != exclude]  # fmt: skip
            return found[:k]


_indexes: dict[tuple[str, str], VectorIndex] = {}
_indexes_lock = threading.Lock()


def nearest(*, tenant: str, model: str, vector: Sequence[float], k: int = TOP_K, exclude: str = "") -> list[Neighbour]:
    """The `k` classified URLs of the tenant nearest to `vector` (same embedding model)."""
    with _indexes_lock:
        index = _indexes.setdefault((tenant, model), VectorIndex(tenant, model))
    return index.search(vector, k=k, exclude=exclude)


def index_cache_clear() -> None:
    """Forget the in-memory copies (tests roll rows back underneath them)."""
    with _indexes_lock:
        _indexes.clear()
