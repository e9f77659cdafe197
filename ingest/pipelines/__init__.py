"""The pipelines' own ledger, beside the engine's: the tables the workflows read and write.

    models     the tables (facts and their heads and embeddings, signal evaluations, keyword
               lists, prices, connections); Django finds them through `ingest.models`
    selectors  reads, some through a per-process cache of the tables operators edit
    services   writes, each idempotent (steps run at least once); the facts' in `fact_writes`
    fact_writes  a fact's or a call's batch's ranked insert-or-supersede, on PostgreSQL one
               prepared round trip, with the ORM on SQLite
    connections  the operators' writes of the connections (create, edit, enable, disable, delete,
               test), every wrong field named at once; `errors` holds their refusals
    cursors    the scheduled pulls' cursors: the window a pull reads, and the writes that hold,
               advance and report it
    pricing    pure cost code: price rows, `cost_for(usage)`, the list prices
    pricer     the engine's pricer (`RUNLEDGER_PRICER`): the price table, then the list prices

It stands below `ingest.workflows` (which runs the pipelines and holds their webhooks) and
above `ingest.sources` and `ingest.extraction`; it imports neither the workflows nor the demo.
The admin, the URLs and the `ingest_pull` command stay where Django looks for them, in `ingest/`.
A new pipeline's tables, reads and writes come here, beside these.
"""
