from django.apps import AppConfig


class EngineConfig(AppConfig):
    name = "ingest.engine"
    label = "engine"
    verbose_name = "Runledger engine"
