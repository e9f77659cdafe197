from django.apps import AppConfig


class RankDiscoConfig(AppConfig):
    """RankDisco's domain tables: domains and what onboarding found: label `rankdisco`."""

    name = "ingest.rankdisco"
    label = "rankdisco"
    verbose_name = "RankDisco domains"
    default_auto_field = "django.db.models.BigAutoField"
