"""Set-up pages: cron schedules, HTTP routes, event subscriptions, ingress credentials, the
tenants' source connections, and the workers page."""

from __future__ import annotations

from django.urls import path

from dashboard.views import connections, credentials, routes, schedules, subscriptions, workers

app_name = "triggers"

urlpatterns = [
    path("schedules/", schedules.schedules, name="schedules"),
    path("schedules/new/", schedules.schedule_new, name="schedule_new"),
    path("schedules/new/create/", schedules.schedule_create_view, name="schedule_create"),
    path("schedules/<str:name>/", schedules.schedule_detail, name="schedule"),
    path("schedules/<str:name>/save/", schedules.schedule_save, name="schedule_save"),
    path("schedules/<str:name>/enable/", schedules.schedule_enable, name="schedule_enable"),
    path("schedules/<str:name>/disable/", schedules.schedule_disable, name="schedule_disable"),
    path("schedules/<str:name>/run/", schedules.schedule_run, name="schedule_run"),
    path("schedules/<str:name>/delete/", schedules.schedule_delete_confirm, name="schedule_delete_confirm"),
    path("schedules/<str:name>/delete/run/", schedules.schedule_delete_view, name="schedule_delete"),
]

urlpatterns += [
    path("routes/", routes.routes, name="routes"),
    path("routes/new/", routes.route_new, name="route_new"),
    path("routes/new/create/", routes.route_create_view, name="route_create"),
    path("routes/<slug:name>/", routes.route_detail, name="route"),
    path("routes/<slug:name>/save/", routes.route_save, name="route_save"),
    path("routes/<slug:name>/enable/", routes.route_enable, name="route_enable"),
    path("routes/<slug:name>/disable/", routes.route_disable, name="route_disable"),
    path("routes/<slug:name>/delete/", routes.route_delete_confirm, name="route_delete_confirm"),
    path("routes/<slug:name>/delete/run/", routes.route_delete_view, name="route_delete"),
    path("routes/<slug:name>/coalesce/", routes.route_coalesce, name="route_coalesce"),
]

urlpatterns += [
    path("subscriptions/new/", subscriptions.subscription_new, name="subscription_new"),
    path("subscriptions/new/create/", subscriptions.subscription_create_view, name="subscription_create"),
    path("subscriptions/<int:sub_id>/", subscriptions.subscription_detail, name="subscription"),
    path("subscriptions/<int:sub_id>/save/", subscriptions.subscription_save, name="subscription_save"),
    path("subscriptions/<int:sub_id>/enable/", subscriptions.subscription_enable, name="subscription_enable"),
    path("subscriptions/<int:sub_id>/disable/", subscriptions.subscription_disable, name="subscription_disable"),
    path(
        "subscriptions/<int:sub_id>/delete/",
        subscriptions.subscription_delete_confirm,
        name="subscription_delete_confirm",
    ),
    path("subscriptions/<int:sub_id>/delete/run/", subscriptions.subscription_delete_view, name="subscription_delete"),
    path("subscriptions/<int:sub_id>/coalesce/", subscriptions.subscription_coalesce, name="subscription_coalesce"),
]

urlpatterns += [
    path("credentials/new/", credentials.credential_new, name="credential_new"),
    path("credentials/new/create/", credentials.credential_create, name="credential_create"),
    path(
        "credentials/<str:tenant>/<str:name>/rotate/",
        credentials.credential_rotate_confirm,
        name="credential_rotate_confirm",
    ),
    path("credentials/<str:tenant>/<str:name>/rotate/run/", credentials.credential_rotate, name="credential_rotate"),
]

urlpatterns += [
    path("credentials/<str:tenant>/<str:name>/enable/", credentials.credential_enable, name="credential_enable"),
    path("credentials/<str:tenant>/<str:name>/disable/", credentials.credential_disable, name="credential_disable"),
    path(
        "credentials/<str:tenant>/<str:name>/delete/",
        credentials.credential_delete_confirm,
        name="credential_delete_confirm",
    ),
    path("credentials/<str:tenant>/<str:name>/delete/run/", credentials.credential_delete, name="credential_delete"),
]

urlpatterns += [
    path("connections/", connections.connections, name="connections"),
    path("connections/new/", connections.connection_new, name="connection_new"),
    path("connections/new/create/", connections.connection_create_view, name="connection_create"),
    path("connections/<str:tenant>/<str:kind>/", connections.connection_detail, name="connection"),
    path("connections/<str:tenant>/<str:kind>/save/", connections.connection_save, name="connection_save"),
    path("connections/<str:tenant>/<str:kind>/enable/", connections.connection_enable, name="connection_enable"),
    path("connections/<str:tenant>/<str:kind>/disable/", connections.connection_disable, name="connection_disable"),
    path("connections/<str:tenant>/<str:kind>/test/", connections.connection_test_view, name="connection_test"),
    path(
        "connections/<str:tenant>/<str:kind>/delete/",
        connections.connection_delete_confirm,
        name="connection_delete_confirm",
    ),
    path(
        "connections/<str:tenant>/<str:kind>/delete/run/", connections.connection_delete_view, name="connection_delete"
    ),
]

urlpatterns += [path("workers/", workers.workers, name="workers")]
