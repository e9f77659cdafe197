"""Live updates: follow the history table, fan out to Channels groups, push htmx fragments.

follower.py tails History (LISTEN/NOTIFY on PostgreSQL, short polling on SQLite) in each web
process; groups.py names the per-tenant and per-instance groups; render.py turns a batch of
changes into the out-of-band fragments a page needs; dashboard/consumers.py throttles per socket.
"""
