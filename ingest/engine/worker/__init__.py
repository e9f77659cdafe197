"""The worker: claim runnable instances under a lease and run a turn of each (turns.py), in a
pool of threads with a heartbeat and a NOTIFY listener (loop.py)."""
