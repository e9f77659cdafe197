"""Login and logout: Django's auth views with Runledger's templates."""

from __future__ import annotations

from django.contrib.auth import views as auth_views

login = auth_views.LoginView.as_view(template_name="registration/login.html", redirect_authenticated_user=True)
# Django 5 logs out on POST only (the nav's form carries the CSRF token).
logout = auth_views.LogoutView.as_view()
