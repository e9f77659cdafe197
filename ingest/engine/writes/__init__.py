"""How the ledger's hot writes reach the database from many threads: the group commit
(commits.py), the choice between it and a write alone (route.py), and the NOTIFY sent after
commit (notify.py)."""
