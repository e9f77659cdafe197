"""Costs and budgets: reserve before spending (budgets.py), record after (record.py), and the approvals a step asks
for."""
