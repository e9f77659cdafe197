"""Saved views of the instances list: save the filters under a name, list them, open, rename and
delete them. Each user's own (another user's view is a 404 and never listed), each write submitted
once, refused when the view changed since the page showed it, and audited."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from ledger_factories import make_instance
from test_submit_once import token_in

from dashboard.models import AuditEntry, SavedView

pytestmark = pytest.mark.db
ROW = re.compile(r'<tr id="row-([^"]+)"')


def _save(client, name: str, query: str):
    page = client.get("/instances/").content.decode()
    return client.post("/saved-views/save/", {"name": name, "query": query, "submission": token_in(page)})


def _views_page(client) -> str:
    return client.get("/saved-views/").content.decode()


def _form_token(html: str, action: str) -> str:
    form = html[html.index(f'action="{action}"') :]
    return token_in(form[: form.index("</form>")])


def _version(html: str, view_id: int) -> str:
    form = html[html.index(f'action="/saved-views/{view_id}/rename/"') :]
    return re.search(r'name="version" value="([0-9]+)"', form).group(1)


def test_a_view_is_saved_with_the_filters_the_list_writes_and_opens_that_list(operator, users):
    make_instance("e1", status="errored")
    make_instance("r1", status="running")
    r = _save(operator, "errored acme", "status=errored&tenant=acme&after=garbage&attr=customer:acme|globex")
    # The list's own query, without its page position: a saved view is a question, not a place.
    assert r.status_code == 302 or r.status_code == 303, r.content.decode()[:500]
    view = SavedView.objects.get()
    assert view.name == "errored acme" and view.user.username == "operator"
    assert view.query == "status=errored&tenant=acme&attr=customer%3Aacme%7Cglobex"
    assert r["Location"] == f"/instances/?{view.query}"
    page = _views_page(operator)
    assert f'href="/instances/?{view.query.replace("&", "&amp;")}">errored acme</a>' in page
    assert "errored acme" in operator.get("/instances/").content.decode()  # the list's menu
    entry = AuditEntry.objects.get(action="saved_view.create")
    assert entry.user.username == "operator" and entry.selection["name"] == "errored acme"


def test_filters_that_do_not_parse_are_not_saved_and_are_named(operator, users):
    page = operator.get("/instances/").content.decode()
    r = operator.post(
        "/saved-views/save/", {"name": "bad", "query": "status=zzz&attr=amount>=x", "submission": token_in(page)}
    )
    body = r.content.decode()
    assert r.status_code == 400 and "&#x27;zzz&#x27; is not a status" in body and "is not a number" in body
    assert not SavedView.objects.exists() and not AuditEntry.objects.filter(action="saved_view.create").exists()


def test_a_name_is_unique_per_user_and_another_user_may_use_it(operator, viewer, users):
    assert _save(operator, "mine", "status=errored").status_code in (302, 303)
    r = _save(operator, "mine", "status=running")
    assert r.status_code == 400 and "already have a saved view named" in r.content.decode()
    assert _save(viewer, "mine", "status=running").status_code in (302, 303)
    assert SavedView.objects.filter(name="mine").count() == 2


def test_a_double_submitted_save_saves_once(operator, users):
    page = operator.get("/instances/?status=errored").content.decode()
    form = {"name": "twice", "query": "status=errored", "submission": token_in(page)}
    first, second = operator.post("/saved-views/save/", form), operator.post("/saved-views/save/", form)
    assert first["Location"] == second["Location"]
    assert SavedView.objects.count() == 1 and AuditEntry.objects.filter(action="saved_view.create").count() == 1


def test_rename_and_delete_act_on_the_owners_view_once_and_are_audited(operator, users):
    _save(operator, "old", "status=errored")
    view = SavedView.objects.get()
    page = _views_page(operator)
    r = operator.post(
        f"/saved-views/{view.id}/rename/",
        {
            "name": "new",
            "version": _version(page, view.id),
            "submission": _form_token(page, f"/saved-views/{view.id}/rename/"),
        },
    )
    assert r.status_code == 302 and SavedView.objects.get().name == "new"
    assert "renamed to &#x27;new&#x27;" in operator.get(r["Location"]).content.decode()
    page = _views_page(operator)
    delete = {"version": _version(page, view.id), "submission": _form_token(page, f"/saved-views/{view.id}/delete/")}
    assert operator.post(f"/saved-views/{view.id}/delete/", delete).status_code == 302
    again = operator.post(f"/saved-views/{view.id}/delete/", delete)  # the same form, sent twice
    assert again.status_code == 303 and not SavedView.objects.exists()
    actions = list(AuditEntry.objects.filter(action__startswith="saved_view.").values_list("action", flat=True))
    assert sorted(actions) == ["saved_view.create", "saved_view.delete", "saved_view.rename"]


def test_a_stale_tab_cannot_undo_a_rename_made_in_another(operator, users):
    _save(operator, "first", "status=errored")
    view = SavedView.objects.get()
    tab_a, tab_b = _views_page(operator), _views_page(operator)
    url = f"/saved-views/{view.id}/rename/"
    operator.post(url, {"name": "second", "version": _version(tab_a, view.id), "submission": _form_token(tab_a, url)})
    r = operator.post(
        url, {"name": "third", "version": _version(tab_b, view.id), "submission": _form_token(tab_b, url)}
    )
    assert r.status_code == 409 and "changed at" in r.content.decode()
    assert SavedView.objects.get().name == "second"
    delete_url = f"/saved-views/{view.id}/delete/"
    r = operator.post(delete_url, {"version": _version(tab_b, view.id), "submission": _form_token(tab_b, delete_url)})
    assert r.status_code == 409 and SavedView.objects.exists()


def test_another_users_view_is_not_listed_and_is_a_404_to_write(operator, stranger, users):
    _save(operator, "private", "status=errored")
    view = SavedView.objects.get()
    assert "private" not in _views_page(stranger)
    assert "private" not in stranger.get("/instances/").content.decode()
    page = _views_page(stranger)
    token = token_in(page) if 'name="submission"' in page else ""
    for url, data in (
        (f"/saved-views/{view.id}/rename/", {"name": "mine now", "version": "1"}),
        (f"/saved-views/{view.id}/delete/", {"version": "1"}),
    ):
        assert stranger.post(url, {**data, "submission": token}).status_code == 404
    assert SavedView.objects.get().name == "private"


def test_a_signed_out_visitor_is_sent_to_log_in(client, users):
    assert client.get("/saved-views/").status_code == 302
    assert client.post("/saved-views/save/", {"name": "x", "query": ""}).status_code in (302, 403)
    assert not SavedView.objects.exists()


def test_the_page_lists_views_by_name(operator, users):
    for name in ("zeta", "alpha"):
        _save(operator, name, "status=errored")
    page = _views_page(operator)
    assert page.index(">alpha</a>") < page.index(">zeta</a>")
    assert get_user_model().objects.get(username="operator").pk == SavedView.objects.first().user_id
