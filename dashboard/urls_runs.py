"""Routes of the runs family: login/logout, the instances ledger, instance detail and actions."""

from __future__ import annotations

from django.urls import path

from dashboard.views import auth

urlpatterns = [
    path("login/", auth.login, name="login"),
    path("logout/", auth.logout, name="logout"),
]
