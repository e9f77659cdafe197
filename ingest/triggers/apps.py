from django.apps import AppConfig


class TriggersConfig(AppConfig):
    name = "ingest.triggers"
    label = "triggers"
    verbose_name = "Triggers: HTTP routes, schedules, events"
