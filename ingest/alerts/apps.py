from django.apps import AppConfig


class AlertsConfig(AppConfig):
    """Alert rules, channels, notifications and instance callbacks: label `alerts`."""

    name = "ingest.alerts"
    label = "alerts"
    verbose_name = "Alerts, notifications and callbacks"

    def ready(self) -> None:
        # Registers alert-deliver and callback-deliver with the engine's registry.
        from ingest.alerts import workflows  # noqa: F401
