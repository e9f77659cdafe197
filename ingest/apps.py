from django.apps import AppConfig


class IngestConfig(AppConfig):
    """The pipelines' Django app: label `ingest`, its tables in `ingest.pipelines.models`."""

    name = "ingest"
    verbose_name = "Ingestion pipelines"

    def ready(self) -> None:
        # Registers every pipeline workflow with the engine's registry.
        from ingest import workflows  # noqa: F401
