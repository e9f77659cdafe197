"""Rollups: hourly pre-aggregates of the ledger for the workflow DAG heat and the costs page.

Tables (dashboard/models.py): `StepHourly` (steps by the UTC hour they started, workflow, tenant,
step: counts and a duration histogram), `CostHourly` (api_costs by UTC hour, tenant, service,
workflow, step, model), `InstanceCost` (lifetime spend per instance), `RollupState` (the roller's
history cursor, the holes below it, and `closed_until`: every earlier hour has been computed).

The overview's counts (instances by created hour and day, by ended hour, with running steps) are
kept exact as of the roller's cursor through `InstanceState`, each instance as the roller last saw
it (`instance_counts.py`), and read corrected by the instances changed since (`instance_reads.py`).

Maintained by the roller (`services.rollup_catch_up`), which follows the history table the way
the live feed does: every engine write to steps or api_costs writes a history row in the same
transaction, so the rows after the cursor say which hours and instances to recompute from the
ledger (`dirty.py`), late-arriving rows and steps that finish days after they started included.
It runs in `manage.py rollup` (a process of its own in production, any number of them: one
leads, by a PostgreSQL advisory lock) and in a thread of `manage.py up` (`runner.py`).

Read by `reads.py`: the rollups for clean closed hours, the ledger for the rest (the window's
partial edge hours, the hours dirtied since the cursor, the hours not closed yet), so figures are
exact and current even when the roller lags; it only makes them cheaper.

Percentiles come from the histograms (`hist.py`): within 4.5 % of the exact value.
"""
