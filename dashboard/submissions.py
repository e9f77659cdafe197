"""An acting form is submitted once. Its page renders a one-time token in a hidden field
(`{% submission_field %}`); the view, wrapped in `once`, claims the token before it acts, in the
same transaction as the action, and keeps the answer it gave (where it sent the user, the messages
it showed). The same token sent again, by a double click, a second tab's resend or the back
button, does not act: it gets the first answer again, with a note that nothing was done twice.

The claim is a row with a unique key (FormSubmission), so it holds across processes: on
PostgreSQL a second submit that arrives while the first is still acting waits on that key until
the first commits, then reads its answer. An answer that did nothing (the form came back with an
error, a preview, a refusal: anything but a redirect) gives the token back, so the corrected form
can be sent. A request without a token is not deduplicated (a script's POST): every form the
console renders carries one.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any

from django.contrib import messages
from django.core import signing
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django_htmx.http import HttpResponseClientRedirect

from dashboard.models import FormSubmission

FIELD = "submission"  # the hidden field's name
MAX_AGE = timedelta(days=7)  # a form loaded longer ago is loaded again; older claims are deleted
_SALT = "runledger.form-submission"

View = Callable[..., HttpResponse]


def submission_token() -> str:
    """A new one-time token: random, signed with the time it was made."""
    return signing.TimestampSigner(salt=_SALT).sign(secrets.token_urlsafe(16))


class SubmissionRefused(Exception):
    """The form's token is invalid; nothing was done."""


def token_key(token: str) -> str:
    """The key a token is claimed under; refuses a token this server did not sign or that is
    older than MAX_AGE."""
    try:
        signing.TimestampSigner(salt=_SALT).unsign(token[:200], max_age=MAX_AGE)
    except signing.SignatureExpired:
        raise SubmissionRefused(
            f"this form was loaded more than {MAX_AGE.days} days ago; load the page "
            "again and submit it from there (nothing was done)"
        ) from None
    except signing.BadSignature:
        raise SubmissionRefused(
            "this form's submission token is not one this console made; load the "
            "page again and submit it from there (nothing was done)"
        ) from None
    return hashlib.sha256(token.encode()).hexdigest()


def _queued(request: HttpRequest) -> list[Any]:
    # The messages a view adds wait in the storage's queue until the response is processed.
    storage = getattr(request, "_messages", None)
    return list(getattr(storage, "_queued_messages", []))


def _answer_location(response: HttpResponse, repeat_to: str | None) -> str | None:
    """Where the answer sent the user, if it is the answer of a done action; None otherwise."""
    if response.has_header("HX-Redirect"):
        return str(response["HX-Redirect"])
    if 300 <= response.status_code < 400 and response.has_header("Location"):
        return str(response["Location"])
    if repeat_to is not None and response.status_code < 300:
        return reverse(repeat_to)
    return None


def _claimed(request: HttpRequest, user_id: int, key: str) -> FormSubmission | None:
    """The claim of `key` for this request, or None when another request holds it."""
    try:
        with transaction.atomic():  # a savepoint: a refused insert leaves the outer transaction usable
            return FormSubmission.objects.create(
                user_id=user_id, key=key, path=request.path[:500], created_at=timezone.now()
            )
    except IntegrityError:
        return None


def _again(request: HttpRequest, user_id: int, key: str) -> HttpResponse:
    """The first submission's answer, for the same token sent again."""
    first = FormSubmission.objects.filter(user_id=user_id, key=key).first()
    if first is None or first.path != request.path[:500]:
        response = HttpResponse(
            "This form's submission token was already used by another form; load the page again (nothing was done).",
            status=409,
            content_type="text/plain",
        )
        return response
    for level, text in first.notes:
        messages.add_message(request, level, text)
    messages.info(
        request,
        f"This form was already submitted at {first.created_at:%H:%M:%S} UTC; it was "
        "not done again. Above is what the first submission did.",
    )
    if getattr(request, "htmx", False):
        return HttpResponseClientRedirect(first.location)
    return HttpResponseRedirect(first.location, status=303)


def once(*, repeat_to: str | None = None) -> Callable[[View], View]:
    """Make a POST view act at most once per form token.

    A done action answers with a redirect (its location is kept). A view whose done answer is a
    page of its own, shown once (a new secret), names in `repeat_to` the page a repeat is sent to.
    """

    def decorate(view: View) -> View:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            token, user_id = request.POST.get(FIELD, ""), request.user.pk
            if not token or user_id is None:  # a script's POST; the views' role check refuses strangers
                return view(request, *args, **kwargs)
            try:
                key = token_key(token)
            except SubmissionRefused as exc:
                return HttpResponse(str(exc), status=400, content_type="text/plain")
            with transaction.atomic():
                FormSubmission.objects.filter(created_at__lt=timezone.now() - MAX_AGE).delete()
                claim = _claimed(request, user_id, key)
                if claim is not None:
                    before = len(_queued(request))
                    response = view(request, *args, **kwargs)
                    location = _answer_location(response, repeat_to)
                    if location is None:
                        claim.delete()  # nothing was done: the corrected form may use the token
                    else:
                        claim.location = location[:2000]
                        claim.notes = [[m.level, str(m.message)] for m in _queued(request)[before:]]
                        claim.save(update_fields=["location", "notes"])
                    return response
            return _again(request, user_id, key)

        return wrapper

    return decorate
