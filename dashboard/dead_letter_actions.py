"""The operator actions on dead letters, once for the console, the REST API and the command line:
retry one from its failed step, replay it as a new instance, discard it, and redrive a selection.

Who may act is the action service's rule (`dashboard.actions`: operators of the letter's tenant;
other tenants' letters are not there). With `expected_version` (what the user was shown,
`dashboard.staleness`), an action on one letter refuses when the letter moved since: a tab opened
before another tab discarded it cannot retry it. The check holds the letter's row lock in the
transaction the engine call and the audit entry are written in.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

from django.db import transaction

from dashboard import access, actions, staleness
from dashboard.actions import ActionRefused, StaleState
from dashboard.audit import Audit, Origin, audited
from ingest.engine.models import DeadLetter
from ingest.engine.services import dead_letters as engine_dead_letters
from ingest.engine.services.dead_letters import DeadLetterFilter

LetterAction = Literal["retry", "replay", "discard"]


class DeadLetterNotVisible(ActionRefused):
    """No such dead letter in your tenants."""

    status, code = 404, "dead_letter_not_found"


class NothingToRedrive(ActionRefused):
    """None of the selected dead letters is open any more; nothing was done."""

    status, code = 409, "nothing_to_redrive"


@dataclass(frozen=True)
class LetterDone:
    """What an action on a dead letter did: the letter, and the instance to show next."""

    action: str
    dead_letter_id: int
    instance_id: str


def dead_letter_actionable(*, user: Any, dead_letter_id: int) -> DeadLetter:
    """The dead letter, if `user` may act on it (404 outside their tenants, 403 for a viewer)."""
    letter = DeadLetter.objects.filter(pk=dead_letter_id, tenant__in=access.tenants_for(user)).first()
    if letter is None:
        raise DeadLetterNotVisible(
            f"no dead letter {dead_letter_id} in {user.get_username()}'s tenants; check the id (nothing was done)"
        )
    actions.tenant_act_check(user, letter.tenant)
    return letter


def _unchanged(letter_id: int, expected: str | None) -> DeadLetter:
    letter = DeadLetter.objects.select_for_update().get(pk=letter_id)
    if expected is not None and (change := staleness.dead_letter_change(letter, version=expected)) is not None:
        raise StaleState(change)
    return letter


def dead_letter_act(
    *,
    user: Any,
    origin: Origin,
    dead_letter_id: int,
    action: LetterAction,
    reason: str,
    expected_version: str | None = None,
    params: dict[str, Any] | None = None,
) -> LetterDone:
    """Retry, replay (with `params`, or the same ones) or discard one dead letter, audited as
    `dead_letter.<action>`. Raises ActionRefused (nothing done; StaleState when the letter moved
    since `expected_version`), the engine's EngineError or InputRejected (reserved params)."""
    letter = dead_letter_actionable(user=user, dead_letter_id=dead_letter_id)
    expected = actions.version_check(expected_version)
    if action == "discard":
        checked = actions.reason_check(reason, origin=origin)

        def discard() -> DeadLetter:
            _unchanged(letter.id, expected)
            return engine_dead_letters.dead_letter_discard(
                dead_letter_id=letter.id, reason=checked, actor=actions.actor_name(user, origin)
            )

        audited(
            user=user,
            origin=origin,
            run=discard,
            audit=Audit(
                "dead_letter.discard",
                [letter.tenant],
                {"dead_letter_id": letter.id, "instance_id": letter.instance_id},
                checked,
            ),
        )
        return LetterDone(action, letter.id, letter.instance_id)
    arguments: dict[str, Any] = {}
    facts: dict[str, Any] = {"dead_letter_id": letter.id}
    if action == "replay":
        arguments["params"] = params
        facts["edited"] = params is not None
    with transaction.atomic():
        _unchanged(letter.id, expected)
        done = actions.instance_act(
            user=user,
            origin=origin,
            instance_id=letter.instance_id,
            action=action,
            reason=reason,
            arguments=arguments,
            audit_as=(f"dead_letter.{action}", facts),
        )
    return LetterDone(action, letter.id, done.target)


def dead_letters_redrive(
    *,
    user: Any,
    origin: Origin,
    ids: list[int],
    scope: DeadLetterFilter | None,
    rate_per_second: float,
    reason: str,
    selection: dict[str, Any],
    tenants: Collection[str],
) -> int:
    """Redrive exactly `ids` (narrowed by `scope`, when it says so) at the capped rate, audited as
    `dead_letters.redrive` with `selection`. When none of them is open any more (redriven or
    discarded meanwhile, by another tab or a second submit) nothing is done and no audit entry is
    written: NothingToRedrive."""

    def run() -> int:
        count = engine_dead_letters.dead_letter_redrive(
            ids=ids,
            filter=scope,
            rate_per_second=rate_per_second,
            actor=actions.actor_name(user, origin),
            reason=reason,
        )
        if not count:
            raise NothingToRedrive(
                f"none of the {len(ids)} selected dead letter(s) is open any more: they "
                "were redriven or discarded meanwhile; nothing was done"
            )
        return count

    return audited(
        user=user,
        origin=origin,
        audit=Audit("dead_letters.redrive", tenants, {**selection, "rate_per_second": rate_per_second}, reason),
        run=run,
    )
