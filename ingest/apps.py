from django.apps import AppConfig


class IngestConfig(AppConfig):
    """The pipelines' Django app: label `ingest`, its tables in `ingest.pipelines.models`."""

    name = "ingest"
    verbose_name = "Ingestion pipelines"

    def ready(self) -> None:
        # Registers every pipeline workflow with the engine's registry.
        from ingest import workflows  # noqa: F401
        from ingest.triggers.scheduler import upkeep_register
        from ingest.workflows.reconcile import reconcile_schedules_ensure

        # The scheduler's leader keeps every tenant's reconcile schedule in line with the settings.
        upkeep_register(reconcile_schedules_ensure)
