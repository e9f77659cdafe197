"""The pipelines' own ledger, beside the engine's: what the workflows read and write.

    models     the tables (facts and their heads and embeddings, signal evaluations, keyword
               lists, prices, connections); Django finds them through `ingest.models`
    selectors  reads, some through a per-process cache of the tables operators edit
    services   writes, each idempotent (steps run at least once)
    pricing    pure cost code: usage values, price rows, `cost_for`, the list prices
    pricer     the engine's pricer: the price table first, then the list prices
    hooks      the webhooks (Gong, Salesforce) that start ingests; routes in `ingest.urls`
    admin      the tables in the Django admin

The workflows that run on these are in `ingest.workflows`; new pipelines add their tables,
reads and writes here, beside these. Nothing in this package imports the demo.
"""
