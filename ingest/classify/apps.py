from django.apps import AppConfig


class ClassifyConfig(AppConfig):
    """URL classification's ledger (label `classify`): classified URLs, the domain cache, the
    fetch method each domain needs, and the similarity index's vectors."""

    name = "ingest.classify"
    label = "classify"
    verbose_name = "URL classification"
    default_auto_field = "django.db.models.BigAutoField"
