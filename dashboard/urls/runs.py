"""Routes of the runs family: login/logout, each user's API tokens, the instances ledger,
instance detail and actions."""

from __future__ import annotations

from django.urls import path

from dashboard.views import auth, bulk, runs, saved_views, tokens

urlpatterns = [
    path("login/", auth.login, name="login"),
    path("logout/", auth.logout, name="logout"),
    path("tokens/", tokens.tokens, name="api-tokens"),
    path("tokens/create/", tokens.token_create, name="api-token-create"),
    path("tokens/<int:token_id>/revoke/", tokens.token_revoke_confirm, name="api-token-revoke-confirm"),
    path("tokens/<int:token_id>/revoke/run/", tokens.token_revoke, name="api-token-revoke"),
    path("instances/", runs.instance_list, name="instance-list"),
    path("saved-views/", saved_views.saved_views, name="saved-views"),
    path("saved-views/save/", saved_views.saved_view_save, name="saved-view-save"),
    path("saved-views/<int:view_id>/rename/", saved_views.saved_view_rename_run, name="saved-view-rename"),
    path("saved-views/<int:view_id>/delete/", saved_views.saved_view_delete_run, name="saved-view-delete"),
    path("bulk-actions/", bulk.bulk_preview, name="instance-bulk-preview"),
    path("bulk-actions/<int:batch_id>/", bulk.bulk_detail, name="instance-bulk"),
    path("bulk-actions/<int:batch_id>/confirm/", bulk.bulk_confirm, name="instance-bulk-confirm"),
    path("instances/<str:instance_id>/", runs.instance_detail, name="instance-detail"),
    path("instances/<str:instance_id>/actions/<slug:action>/", runs.instance_action_confirm, name="instance-action"),
    path(
        "instances/<str:instance_id>/actions/<slug:action>/run/", runs.instance_action_run, name="instance-action-run"
    ),
]
