from django.apps import AppConfig


class IngestConfig(AppConfig):
    """The pipelines' Django app: label `ingest`, its tables in `ingest.pipelines.models`."""

    name = "ingest"
    verbose_name = "Ingestion pipelines"

    def ready(self) -> None:
        # Registers every pipeline workflow with the engine's registry.
        from ingest import workflows  # noqa: F401

        # The admin lives with the tables it shows; Django's autodiscovery only looks for
        # `ingest.admin`, so it is imported here, once the admin app is ready.
        from ingest.pipelines import admin  # noqa: F401
