"""The operator pages' views, one module per page family (urls in dashboard/urls/):

- runs pages: `runs` (the instances ledger, one instance, its actions), `auth` (login/logout);
- operations pages: `overview`, `workflows` (summaries and one workflow's DAG), `dead_letters`,
  `costs`, `budgets`, `approvals`, `audit` (the operator actions log), over `common` (typed htmx request,
  page-or-fragment render, tenant checks, engine calls).
"""
