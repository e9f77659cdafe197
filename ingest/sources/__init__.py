"""Clients for the outside systems (Gong, Salesforce, LLM and embedding providers, DataForSEO,
ZenRows), and `probes`: the one cheap call per system that "test connection" makes.

These are the only modules in Runledger that do network IO. Every client raises errors
derived from `ingest.sources.errors.SourceError`, which carry `retryable` and
`retry_after` so a workflow step can decide between retrying and giving up, and reports what
each call consumed as a `Usage` (`ingest.sources.usage`).
"""
