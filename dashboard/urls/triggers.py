"""Trigger pages: cron schedules, HTTP routes, event subscriptions, and the workers page."""

from __future__ import annotations

from django.urls import path

from dashboard.views import routes, schedules, workers

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
    path("routes/<slug:name>/delete/", routes.route_delete_confirm, name="route_delete_confirm"),
    path("routes/<slug:name>/delete/run/", routes.route_delete_view, name="route_delete"),
    path("routes/<slug:name>/coalesce/", routes.route_coalesce, name="route_coalesce"),
    path("subscriptions/<int:sub_id>/", routes.subscription_detail, name="subscription"),
    path("subscriptions/<int:sub_id>/coalesce/", routes.subscription_coalesce, name="subscription_coalesce"),
    path("credentials/<str:tenant>/<str:name>/rotate/", routes.credential_rotate, name="credential_rotate"),
]

urlpatterns += [path("workers/", workers.workers, name="workers")]
