"""The worker: claim runnable instances under a lease and run a turn of each (turns.py), in a
pool of threads with a heartbeat (loop.py), and its own PostgreSQL session that ties its leases
to its life and wakes it up (liveness.py)."""
