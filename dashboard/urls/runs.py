"""Routes of the runs family: login/logout, the instances ledger, instance detail and actions."""

from __future__ import annotations

from django.urls import path

from dashboard.views import auth, bulk, runs

urlpatterns = [
    path("login/", auth.login, name="login"),
    path("logout/", auth.logout, name="logout"),
    path("instances/", runs.instance_list, name="instance-list"),
    path("bulk-actions/", bulk.bulk_preview, name="instance-bulk-preview"),
    path("bulk-actions/<int:batch_id>/", bulk.bulk_detail, name="instance-bulk"),
    path("bulk-actions/<int:batch_id>/confirm/", bulk.bulk_confirm, name="instance-bulk-confirm"),
    path("instances/<str:instance_id>/", runs.instance_detail, name="instance-detail"),
    path("instances/<str:instance_id>/actions/<slug:action>/", runs.instance_action_confirm,
         name="instance-action"),
    path("instances/<str:instance_id>/actions/<slug:action>/run/", runs.instance_action_run,
         name="instance-action-run"),
]
