"""Alerts, notifications and instance callbacks.

Rules are data (`models.Rule`, per tenant) over conditions the ledger already records; channels
say where a notification goes (email, a Slack-compatible incoming webhook, a generic webhook
signed as our own ingress verifies). Every notification and every callback is sent by the engine
itself, as an `alert-deliver` or `callback-deliver` instance, so it is retried and dead-lettered
like any step. `runner.AlertRunner` follows the history table for what happens (an instance
ending, a dead letter, an approval) and checks the time-based conditions each round.

Layout: `conditions.py` pure decisions (which rule an event matches, its group, throttling);
`models.py` the tables; `services.py` writes (`<entity>_<verb>`); `selectors.py` reads;
`messages.py` what a notification says; `follow.py` the history follower; `checks.py` the
periodic conditions; `workflows.py` the delivery workflows; `runner.py` the loop.
"""
