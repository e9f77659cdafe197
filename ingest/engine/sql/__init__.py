"""Every raw SQL statement of the engine, one typed function each, so every lock is in this folder.

The ORM says the rest. These are here because the ORM cannot say them well: claiming with
`FOR UPDATE SKIP LOCKED`, guarded updates that return the operator's control flag in the same
round trip, and LISTEN/NOTIFY. One module per table family or worker phase; they import nothing
of the engine above this folder (the group commit and flow control call them, never the reverse).
"""
