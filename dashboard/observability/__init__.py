"""Observability: Prometheus metrics computed from the ledger, health probes, JSON logs with
secrets redacted, and the REST API's metrics summary (docs/observability.md).

A Django app of its own (label `observability`) because it keeps two small tables: the metric
tally folded from the history table, and the ingress request counts every web process flushes.
It reads the engine's tables through their models and writes none of them.
"""
