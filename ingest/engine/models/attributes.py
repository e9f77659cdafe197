"""Search attributes: the indexed tags a workflow sets on its instance (customer, domain, call id)
so operators can find and sort its runs by them. docs/engine-contract.md, "Search attributes"."""

from __future__ import annotations

from django.db import models

from ingest.engine.models.instances import Instance


class InstanceAttributes(models.Model):
    """One row per instance that set attributes: a JSON object of text values.

    Its own table, like InstanceSearch, because every claim and completion updates the instance
    row outside HOT, and a GIN index there would be re-written on each of those updates. The GIN
    index (jsonb_path_ops, PostgreSQL only: migration 0010) serves `attributes @> {"k": "v"}`.
    """

    instance = models.OneToOneField(Instance, primary_key=True, on_delete=models.CASCADE, related_name="attrs",
                                    db_constraint=False)
    attributes = models.JSONField(default=dict)

    class Meta:
        db_table = "engine_instance_attributes"
