"""`domain-onboard`: the workflow (`workflow`), its step bodies (`steps`, and `intents` for
the keywords' search intents) and the outside clients it uses (`clients`)."""

from __future__ import annotations

from ingest.workflows.domain_onboard.clients import OnboardClients, clients_install
from ingest.workflows.domain_onboard.workflow import (
    DomainOnboard,
    domain_onboard_start,
    onboard_instance_id,
)

__all__ = ["DomainOnboard", "OnboardClients", "clients_install", "domain_onboard_start", "onboard_instance_id"]
