from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Runledger dashboard"

    def ready(self) -> None:
        # The operations pages' live renderers join the registry in every process that may serve
        # pages (web and tests), whichever of the URLconf or the websocket router is imported
        # first; a worker process serves none (settings.RUNLEDGER_WORKER_PROCESS).
        from django.conf import settings

        if getattr(settings, "RUNLEDGER_WORKER_PROCESS", False):
            return
        from dashboard.live import ops_pages

        ops_pages.register_all()
