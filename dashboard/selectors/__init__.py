"""Reads for the dashboard (HackSoft style: writes in services, reads in selectors).

One module per page family; this package re-exports them all (named in `__all__`, which the
type checker reads as the package's public names), so `from dashboard import selectors` and
`selectors.instance_list(...)` work:

- runs pages: `instance_filters` (the list's filters, from and to the URL), `instance_matches`
  (what they match), `instances` (keyset and numbered pages, counts), `instance_detail`,
  `run_layout` (pure waterfall and DAG ranks), `history` (what the live feed reads);
- operations pages: `overview`, `workflows` (DAG heat), `source_pulls` (the scheduled pulls of
  the connections, on the workflows page), `dead_letters`, `costs`, `budgets`,
  `approvals`, with `common` (money, windows, filter_given).

Runs selectors take the requesting `user`; operations selectors take the caller's `tenants`.
Either way no row outside the user's tenants is returned. Templates get plain data from here.
"""

from __future__ import annotations

from dashboard.selectors.approvals import (
    approval_get,
    approvals_pending,
    approvals_recent,
)
from dashboard.selectors.budgets import (
    BudgetRow,
    Forecast,
    budget_burn_rows,
    budget_events,
    budget_forecast,
    budget_get,
    budget_rows,
    budgets_visible,
    period_end,
    reservations_held,
)
from dashboard.selectors.common import (
    MICRO,
    WINDOWS,
    ZERO,
    window_start,
)
from dashboard.selectors.costs import (
    COST_DIMENSIONS,
    EXPORT_COLUMNS,
    METADATA_DIMENSIONS,
    CostFilters,
    cost_breakdown,
    cost_by_dimension,
    cost_by_instance,
    cost_export_rows,
    cost_filter_choices,
    cost_series,
    cost_total,
    treemap_levels,
)
from dashboard.selectors.dead_letters import (
    DeadLetterFilters,
    DeadLetterGroup,
    RedriveEstimate,
    dead_letter_get,
    dead_letter_groups,
    dead_letter_ids_visible,
    dead_letter_items,
    dead_letter_selection_ids,
    dead_letter_tenants,
    dead_letters_failed_for_good,
    redrive_estimate,
    redrive_failed_for_good,
    step_cost_per_attempt,
)
from dashboard.selectors.history import (
    Change,
    history_changes,
    history_cursor,
)
from dashboard.selectors.instance_detail import (
    HISTORY_LIMIT,
    CostLine,
    InstanceDetail,
    Lineage,
    StepView,
    instance_detail,
    instance_failed_for_good,
    instance_get,
    instance_ingress_traceparent,
)
from dashboard.selectors.instance_filters import (
    RANGES,
    SORT_LABELS,
    Cursor,
    InstanceFilters,
)
from dashboard.selectors.instance_items import RunItems, instance_items
from dashboard.selectors.instance_matches import instance_filtered
from dashboard.selectors.instances import (
    PAGE_SIZE,
    InstancePage,
    instance_attributes,
    instance_count,
    instance_count_newer,
    instance_list,
    instance_list_counted,
    instance_rows,
    workflow_names,
)
from dashboard.selectors.overview import (
    approvals_pending_count,
    dead_letters_open_count,
    instance_status_counts,
    overview_figures,
    spend_by_service,
    steps_in_flight,
    steps_in_flight_count,
    throughput_rows,
)
from dashboard.selectors.run_layout import (
    DagNode,
    DagRank,
    Segment,
    WaterfallRow,
    dag_ranks,
    waterfall,
)
from dashboard.selectors.source_pulls import SourcePullRow, source_pull_rows
from dashboard.selectors.workflows import (
    empty_heat,
    instance_tenant,
    workflow_known,
    workflow_retention,
    workflow_step_heat,
    workflow_step_runs,
    workflow_summaries,
)

__all__ = [
    "SORT_LABELS",
    "SourcePullRow",
    "source_pull_rows",
    "instance_attributes",
    "instance_items",
    "RunItems",
    "instance_count",
    "instance_list_counted",
    "instance_filtered",
    "BudgetRow",
    "COST_DIMENSIONS",
    "METADATA_DIMENSIONS",
    "Change",
    "CostFilters",
    "CostLine",
    "Cursor",
    "DagNode",
    "DagRank",
    "DeadLetterFilters",
    "DeadLetterGroup",
    "EXPORT_COLUMNS",
    "Forecast",
    "HISTORY_LIMIT",
    "InstanceDetail",
    "InstanceFilters",
    "InstancePage",
    "Lineage",
    "MICRO",
    "PAGE_SIZE",
    "RANGES",
    "RedriveEstimate",
    "Segment",
    "StepView",
    "WINDOWS",
    "WaterfallRow",
    "ZERO",
    "approval_get",
    "approvals_pending",
    "approvals_pending_count",
    "approvals_recent",
    "budget_burn_rows",
    "budget_events",
    "budget_forecast",
    "budget_get",
    "budget_rows",
    "budgets_visible",
    "cost_breakdown",
    "treemap_levels",
    "cost_by_dimension",
    "cost_by_instance",
    "cost_export_rows",
    "cost_filter_choices",
    "cost_series",
    "cost_total",
    "dag_ranks",
    "dead_letter_get",
    "dead_letter_groups",
    "dead_letter_items",
    "dead_letter_ids_visible",
    "dead_letter_selection_ids",
    "dead_letter_tenants",
    "dead_letters_failed_for_good",
    "redrive_failed_for_good",
    "dead_letters_open_count",
    "empty_heat",
    "history_changes",
    "history_cursor",
    "instance_count_newer",
    "instance_detail",
    "instance_ingress_traceparent",
    "instance_failed_for_good",
    "instance_get",
    "instance_list",
    "instance_rows",
    "instance_status_counts",
    "overview_figures",
    "instance_tenant",
    "period_end",
    "redrive_estimate",
    "reservations_held",
    "spend_by_service",
    "step_cost_per_attempt",
    "steps_in_flight",
    "steps_in_flight_count",
    "throughput_rows",
    "waterfall",
    "window_start",
    "workflow_known",
    "workflow_retention",
    "workflow_names",
    "workflow_step_heat",
    "workflow_step_runs",
    "workflow_summaries",
]
