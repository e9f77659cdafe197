"""The metrics' own tables: counters folded from the ledger's history, and ingress counts.

Counters are computed from the ledger, not kept in process memory, so every web process answers
a scrape with the same figures however many workers and web processes run (docs/observability.md).
"""

from __future__ import annotations

from django.db import models


class MetricTally(models.Model):
    """One counter series (or one histogram bucket) folded from the history rows up to the cursor.

    `labels` is the series' label values joined by US (\\x1f) in the metric's label order. The row
    whose metric is `CURSOR` holds, in `value`, the id of the last history row folded in: it is
    read in the same SELECT as the series, so a reader never sees a tally and a cursor that
    disagree.
    """

    CURSOR = "_cursor"

    metric = models.CharField(max_length=64)
    labels = models.CharField(max_length=1000, blank=True, default="")
    value = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["metric", "labels"], name="metric_tally_series"),
        ]


class IngressTally(models.Model):
    """Ingress requests answered, by route and status: each web process adds its own counts."""

    route = models.CharField(max_length=120)
    status = models.PositiveSmallIntegerField()
    n = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["route", "status"], name="ingress_tally_series"),
        ]
