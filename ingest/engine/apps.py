from __future__ import annotations

import importlib

from django.apps import AppConfig
from django.conf import settings


class EngineConfig(AppConfig):
    name = "ingest.engine"
    label = "engine"
    verbose_name = "Runledger engine"

    def ready(self) -> None:
        # Workflows register when their module is imported; these are imported at start-up in
        # every process (web, worker, scheduler) so all of them know the same workflows.
        importlib.import_module("ingest.engine.hooks")  # registers the on_error hook's workflow
        importlib.import_module("ingest.engine.batch_workflow")  # bulk actions run as instances
        from ingest.engine.runtime import steplog

        steplog.install()  # what a step's code logs is kept with its attempt
        for module in getattr(settings, "RUNLEDGER_WORKFLOW_MODULES", []):
            importlib.import_module(module)
