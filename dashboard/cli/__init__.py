"""`runledger`: the operators' command-line client. It speaks the REST API over HTTP with an API
token, so it runs from any machine and has exactly the token's permissions (a viewer's token
lists and shows; acting needs an operator's). It imports nothing of Django.

    runledger [--url URL] [--token TOKEN] list [--status S] [--workflow W] [--tenant T] [--limit N]
        [--attr TERM ...] [--top-level] [--parent ID]
    runledger start WORKFLOW --params JSON [--id ID] [--tenant T] [--priority N] [--start-at TIME]
        [--attr KEY=VALUE ...]
    runledger show ID
    runledger tail ID [--interval 1] [--timeout 0]
    runledger retry ID --reason R [--yes]
    runledger replay ID --reason R [--params JSON]
    runledger terminate ID --reason R [--rollback]
    runledger redrive (--ids 4,7 | [--workflow W --tenant T --step-name S --signature X]) --reason R
                      [--rate 5] [--yes]
    runledger dead-letters [--state open] [--workflow W] [--tenant T] [--limit N]
    runledger discard DEAD_LETTER_ID --reason R [--expected-version V]
    runledger schedules list | show NAME | create NAME --tenant T --workflow W --cron EXPR [...]
                        | edit NAME [--cron EXPR ...] | run NAME | enable NAME | disable NAME | delete NAME [--yes]
    runledger routes list | show NAME | create NAME --tenant T --workflow W [...] | edit NAME [...]
                     | enable NAME | disable NAME | delete NAME [--yes]
    runledger subscriptions list | show ID | create --tenant T --pattern GLOB --workflow W [--filters JSON]
                            | edit ID [...] | enable ID | disable ID | delete ID [--yes]
    runledger credentials list | create --tenant T [--name N] | rotate TENANT NAME --reason R
                          [--overlap SECONDS] [--yes]

The trigger commands send what they are given to the API, whose check is the console's: every
wrong field is printed at once, by its name (the flag with '_' for '-'), and nothing changes.

A retry of an instance whose step failed for good (NonRetryableError) asks first (--yes skips
the question) and points to a replay with edited params; `dead-letters` and a redrive's preview
say which letters a retry cannot help. URL and token default to $RUNLEDGER_URL and $RUNLEDGER_TOKEN. A token comes from
the console's API tokens page (/tokens/) or, on the server, `manage.py token create --user NAME --name cli`.
Exit status: 0 done, 1 the API
refused (its message is printed), 2 bad usage.
"""

from __future__ import annotations

from dashboard.cli.main import main

__all__ = ["main"]
