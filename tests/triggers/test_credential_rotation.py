"""A rotation with an overlap: the replaced pair signs requests until the overlap ends, to the
second, then is refused with 401 (also by a process that kept the credential from an earlier
request); an overlap of 0 refuses it at once; a second rotation ends the first one's overlap;
the replaced secret stays encrypted at rest and is erased once its overlap has ended."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from ingest.engine.models import Instance
from ingest.triggers import signing
from ingest.triggers.errors import InvalidIngressSecret, NotAuthenticated, TriggerError
from ingest.triggers.models import IngressSecret, Route
from ingest.triggers.services import ingress_secret_rotate, ingress_secrets_expire, route_trigger

pytestmark = [pytest.mark.db]


def trigger(token: str, secret: str, *, at: datetime, body: dict[str, Any] | None = None) -> str:
    """A signed request to route `orders` at time `at` (as the ingress view calls it); its instance id."""
    raw = json.dumps(body or {"at": at.isoformat()}).encode()
    stamp = str(int(at.timestamp()))
    triggered = route_trigger(
        route="orders",
        token=token,
        timestamp=stamp,
        signature=signing.sign(secret=secret, timestamp=stamp, body=raw),
        body=raw,
        idempotency_key=None,
        now=at,
    )
    return triggered.instance_id


def refused(token: str, secret: str, *, at: datetime) -> TriggerError:
    with pytest.raises(TriggerError) as info:
        trigger(token, secret, at=at)
    return info.value


def rotate(*, at: datetime, overlap: int) -> tuple[str, str]:
    _, token, secret = ingress_secret_rotate(
        tenant="acme", name="default", now=at, overlap_seconds=overlap, reason="scheduled rotation"
    )
    return token, secret


@pytest.mark.django_db(transaction=True)  # as in production: the process keeps the credential between requests
def test_the_old_pair_works_until_the_overlap_ends_then_is_refused_even_when_kept(
    route: Route, acme_creds: dict[str, str]
) -> None:
    t0 = timezone.now().replace(microsecond=0)
    old = (acme_creds["token"], acme_creds["secret"])
    trigger(*old, at=t0)  # the process now keeps this credential
    new = rotate(at=t0, overlap=3600)
    assert trigger(*old, at=t0 + timedelta(seconds=1))
    assert trigger(*new, at=t0 + timedelta(seconds=2))
    assert trigger(*old, at=t0 + timedelta(seconds=3599))  # kept again, from the fresh lookup
    ended = refused(*old, at=t0 + timedelta(seconds=3600))
    assert isinstance(ended, NotAuthenticated) and ended.status == 401 and "rotated" in str(ended)
    assert isinstance(refused(*old, at=t0 + timedelta(days=1)), NotAuthenticated)
    assert trigger(*new, at=t0 + timedelta(seconds=3600))
    assert Instance.objects.count() == 5


@pytest.mark.django_db
def test_a_pair_is_a_pair_during_the_overlap(route: Route, acme_creds: dict[str, str]) -> None:
    t0 = timezone.now()
    token, secret = rotate(at=t0, overlap=600)
    for mixed in ((acme_creds["token"], secret), (token, acme_creds["secret"])):
        assert refused(*mixed, at=t0).status == 401
    assert not Instance.objects.exists()


@pytest.mark.django_db
def test_an_overlap_of_zero_refuses_the_old_pair_at_once(route: Route, acme_creds: dict[str, str]) -> None:
    t0 = timezone.now()
    new = rotate(at=t0, overlap=0)
    assert isinstance(refused(acme_creds["token"], acme_creds["secret"], at=t0), NotAuthenticated)
    row = IngressSecret.objects.get()
    assert (row.previous_token_hash, row.previous_hmac_secret, row.previous_valid_until) == (None, None, None)
    assert trigger(*new, at=t0)


@pytest.mark.django_db
def test_a_second_rotation_ends_the_first_ones_overlap(route: Route, acme_creds: dict[str, str]) -> None:
    t0 = timezone.now()
    second = rotate(at=t0, overlap=3600)
    third = rotate(at=t0 + timedelta(seconds=10), overlap=3600)
    at = t0 + timedelta(seconds=20)
    assert refused(acme_creds["token"], acme_creds["secret"], at=at).status == 401
    assert trigger(*second, at=at) and trigger(*third, at=at)


@pytest.mark.django_db
def test_the_replaced_secret_is_encrypted_and_erased_when_its_overlap_ends(
    route: Route, acme_creds: dict[str, str]
) -> None:
    t0 = timezone.now()
    rotate(at=t0, overlap=60)
    with connection.cursor() as cursor:
        cursor.execute("SELECT previous_hmac_secret, previous_token_hash FROM triggers_ingresssecret")
        stored, token_hash = cursor.fetchone()
    assert acme_creds["secret"] not in stored and stored.startswith("enc:")
    assert token_hash == signing.token_hash(acme_creds["token"])
    assert ingress_secrets_expire(now=t0 + timedelta(seconds=59)) == 0
    assert IngressSecret.objects.get().previous_valid_until is not None
    assert ingress_secrets_expire(now=t0 + timedelta(seconds=60)) == 1
    row = IngressSecret.objects.get()
    assert (row.previous_token_hash, row.previous_token_prefix, row.previous_hmac_secret) == (None, "", None)


@pytest.mark.django_db
def test_a_bad_rotation_names_both_fields_and_changes_nothing(acme_creds: dict[str, str]) -> None:
    before = IngressSecret.objects.values().get()
    for overlap, reason in ((-1, "  "), (7 * 24 * 3600 + 1, ""), (True, None), ("3600", "x" * 2001)):
        with pytest.raises(InvalidIngressSecret) as info:
            ingress_secret_rotate(
                tenant="acme", name="default", now=timezone.now(), overlap_seconds=overlap, reason=reason
            )
        assert set(info.value.problems) == {"overlap_seconds", "reason"}
    assert IngressSecret.objects.values().get() == before
