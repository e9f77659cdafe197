"""The runtime that replays a workflow: a turn (turn.py) replays `run`, each step runs through
`Execution` (execution.py) and the step object (steps.py), and the turn's ledger writes go
through the store (store.py, store_waits.py, store_end.py)."""
