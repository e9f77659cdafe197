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

    Beside the attributes, a copy of the instance's columns the instances list filters and sorts
    by (tenant, workflow, status and the times), so a list with an attribute filter reads this
    table alone for its matches, its count and its order, not one instance heap row per match
    (10,000 for a common value: more pages than shared_buffers holds). Written only by database
    triggers (migration 0019): on this row's insert, from the instance's row; on an instance
    update that changes one of them, for instances that have a row here. NULL only in a row whose
    instance is gone, which then matches no tenant. SQLite drops the triggers of a table it
    rebuilds: a later migration that rebuilds `engine_instance` or this table puts them back
    (_attributes_sqlite.REBUILD; 0013 says why).
    """

    instance = models.OneToOneField(Instance, primary_key=True, on_delete=models.CASCADE, related_name="attrs",
                                    db_constraint=False)
    attributes = models.JSONField(default=dict)

    tenant = models.CharField(max_length=100, null=True, blank=True, editable=False)
    workflow = models.CharField(max_length=200, null=True, blank=True, editable=False)
    status = models.CharField(max_length=24, null=True, blank=True, editable=False)
    created_at = models.DateTimeField(null=True, blank=True, editable=False)
    started_at = models.DateTimeField(null=True, blank=True, editable=False)
    ended_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        db_table = "engine_instance_attributes"
