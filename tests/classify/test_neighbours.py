"""The nearest-neighbour index over classified URLs (on the suite's database: SQLite, or
PostgreSQL with DATABASE_URL): exact top 3 by cosine, caught up across writers by id."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ingest.classify.neighbours import VectorIndex, index_cache_clear, nearest
from ingest.classify.services import url_hash, url_vector_add

pytestmark = [pytest.mark.db, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    index_cache_clear()


def unit(rng: random.Random, dim: int = 16) -> list[float]:
    vector = np.array([rng.gauss(0, 1) for _ in range(dim)])
    return list(vector / np.linalg.norm(vector))


def test_it_returns_the_exact_top_three_by_cosine_best_first() -> None:
    rng = random.Random(7)
    vectors = {f"https://site{i}.example/": unit(rng) for i in range(200)}
    for url, vector in vectors.items():
        url_vector_add(tenant="acme", model="m", url=url, vector=vector, labels={"domain_type": "blog"}, confidence=90)
    query = unit(rng)
    found = nearest(tenant="acme", model="m", vector=query)
    brute = sorted(vectors, key=lambda u: -float(np.dot(vectors[u], query)))[:3]
    assert [n.url for n in found] == brute
    assert [round(n.score, 5) for n in found] == [round(float(np.dot(vectors[u], query)), 5) for u in brute]


def test_rows_added_after_the_first_search_are_found_by_the_next() -> None:
    rng = random.Random(8)
    for i in range(70):  # past the first allocation of 64 rows: the matrix grows
        url_vector_add(tenant="acme", model="m", url=f"https://a{i}.example/", vector=unit(rng), labels={},
                       confidence=90)  # fmt: skip
    query = unit(rng)
    assert len(nearest(tenant="acme", model="m", vector=query)) == 3
    url_vector_add(tenant="acme", model="m", url="https://twin.example/", vector=query, labels={}, confidence=90)
    best = nearest(tenant="acme", model="m", vector=query)[0]
    assert best.url == "https://twin.example/" and best.score == pytest.approx(1.0, abs=1e-5)


def test_the_index_is_per_tenant_and_model_and_leaves_out_the_url_itself() -> None:
    rng = random.Random(9)
    query = unit(rng)
    url_vector_add(tenant="acme", model="m", url="https://self.example/", vector=query, labels={}, confidence=90)
    url_vector_add(tenant="other", model="m", url="https://theirs.example/", vector=query, labels={}, confidence=90)
    url_vector_add(tenant="acme", model="m2", url="https://model2.example/", vector=query, labels={}, confidence=90)
    url_vector_add(tenant="acme", model="m", url="https://near.example/", vector=unit(rng), labels={}, confidence=90)
    found = nearest(tenant="acme", model="m", vector=query, exclude=url_hash("https://self.example/"))
    assert [n.url for n in found] == ["https://near.example/"]


def test_a_url_is_indexed_once() -> None:
    rng = random.Random(10)
    assert url_vector_add(
        tenant="acme", model="m", url="https://x.example/", vector=unit(rng), labels={}, confidence=90
    )
    assert not url_vector_add(tenant="acme", model="m", url="https://x.example/", vector=unit(rng), labels={},
                              confidence=95)  # fmt: skip
    assert len(nearest(tenant="acme", model="m", vector=unit(rng), k=5)) == 1


def test_an_empty_index_or_a_vector_of_another_size_finds_nothing() -> None:
    rng = random.Random(11)
    assert nearest(tenant="acme", model="m", vector=unit(rng)) == []
    url_vector_add(tenant="acme", model="m", url="https://x.example/", vector=unit(rng), labels={}, confidence=90)
    assert nearest(tenant="acme", model="m", vector=unit(rng, dim=8)) == []
    assert VectorIndex("acme", "m").search([0.0] * 16) == []
