"""Search attributes: the indexed tags a workflow sets on its instance (customer, domain, call id)
so operators can find and sort its runs by them. docs/engine-contract.md, "Search attributes"."""

from __future__ import annotations

from django.db import models

from ingest.engine.models.instances import Instance


class InstanceListColumns(models.Model):
    """The copy of its instance's columns the instances list filters and sorts by, which
    database triggers keep on the attribute rows (0019) and the value rows (0020); the columns
    of migrations/_attributes_sqlite.COLUMNS. NULL only in a row whose instance is gone, which
    then matches no tenant."""

    tenant = models.CharField(max_length=100, null=True, blank=True, editable=False)
    workflow = models.CharField(max_length=200, null=True, blank=True, editable=False)
    status = models.CharField(max_length=24, null=True, blank=True, editable=False)
    created_at = models.DateTimeField(null=True, blank=True, editable=False)
    started_at = models.DateTimeField(null=True, blank=True, editable=False)
    ended_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        abstract = True


class InstanceAttributes(InstanceListColumns):
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

    instance = models.OneToOneField(
        Instance, primary_key=True, on_delete=models.CASCADE, related_name="attrs", db_constraint=False
    )
    attributes = models.JSONField(default=dict)

    class Meta:
        db_table = "engine_instance_attributes"


class InstanceAttributeValue(InstanceListColumns):
    """One row per (instance, search attribute key): the value, beside the same copy of the
    instance's list columns that InstanceAttributes keeps.

    Why a row per key as well as the JSON object: an attribute filter through the GIN index finds
    its instances' attribute rows scattered over the whole table (a common value, 10,000 of them,
    touches ~7,900 pages of a 1 M-instance ledger, more than shared_buffers keeps warm), while
    the btree `instance_attribute_value_list` holds every entry of one (key, value) side by side
    with the columns the list filters and sorts by: the list reads a few hundred index pages and
    no table page (an index-only scan, PostgreSQL; SQLite ignores INCLUDE and reads the rows).

    Written only by database triggers on engine_instance_attributes (migration 0020): an insert
    or a change of `attributes` writes the rows anew, a change of the copied columns (the
    instance's own triggers, 0019) updates them, a delete removes them. So the rows follow every
    path that changes an attribute or an instance, as the copy in InstanceAttributes does.
    """

    pk = models.CompositePrimaryKey("instance_id", "key")
    instance_id = models.CharField(max_length=100, editable=False)
    key = models.CharField(max_length=40, editable=False)
    value = models.CharField(max_length=200, editable=False)

    class Meta:
        db_table = "engine_instance_attribute_values"
        indexes = [
            models.Index(
                fields=["key", "value", "tenant", "status"],
                name="instance_attribute_value_list",
                include=["workflow", "created_at", "started_at", "ended_at", "instance_id"],
            ),
        ]
