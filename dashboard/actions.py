"""The one service every interface (console, REST API, command line) acts on one instance
through: who may act, each action's arguments, the reason rule, the engine call and the audit
entry; and starting a run.

The catalogue of actions (what each does, in which statuses it applies) is in
dashboard/action_catalogue.py; its names are importable from here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from dashboard import access, staleness
from dashboard.action_catalogue import ACTIONS as ACTIONS
from dashboard.action_catalogue import Action as Action
from dashboard.action_catalogue import available_actions as available_actions
from dashboard.action_catalogue import failed_for_good as failed_for_good
from dashboard.audit import Audit, Origin, audit_record, audited
from dashboard.models import AuditSource
from ingest.alerts.callbacks import callback_register
from ingest.alerts.models import CallbackSource
from ingest.engine import InvalidSearchAttributes
from ingest.engine.models import Instance
from ingest.engine.services import attributes, control, forks, instances
from ingest.triggers.limits import reserved_params_check

# ---- the one path every interface acts through -------------------------------------------
#
# The console, the REST API and `manage.py operate` all call `instance_act` / `instance_start`:
# who may act (tenant membership and role), what arguments an action takes, the reason rule,
# the engine call and the audit entry are written here once. The instance's state is checked by
# the engine under the row's lock (a check here would only race it); its refusal (an
# EngineError) reaches every caller with the same message. Whether the instance moved since the
# caller was shown it (its version) is checked here, under that same lock, in the transaction
# the engine call then runs in.


class ActionRefused(Exception):
    """The action was refused; nothing was done."""

    status = 400
    code = "refused"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.__doc__)
        self.message = str(self)


class UnknownAction(ActionRefused):
    """No such action."""

    status, code = 404, "unknown_action"


class InstanceNotVisible(ActionRefused):
    """No such instance in your tenants."""

    status, code = 404, "instance_not_found"


class TenantNotVisible(ActionRefused):
    """No such tenant among yours."""

    status, code = 404, "tenant_not_found"


class NotAnOperator(ActionRefused):
    """Acting needs the operator role."""

    status, code = 403, "forbidden"


class BadArguments(ActionRefused):
    """The action's arguments are not valid."""

    status, code = 400, "invalid_arguments"


class StaleState(ActionRefused):
    """What the action was decided on changed since it was shown; nothing was done."""

    status, code = 409, "stale"


REASON_MAX = 2000
PRIORITY_RANGE = (-1000, 1000)
INSTANCE_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_-]*$"  # what the engine accepts as an instance id
# The arguments each action takes beyond the reason; anything else is refused, not ignored.
ARGUMENTS: dict[str, frozenset[str]] = {
    "pause": frozenset(),
    "resume": frozenset(),
    "retry": frozenset(),
    "terminate": frozenset({"rollback"}),
    "restart": frozenset({"from_step"}),
    "replay": frozenset({"params"}),
    "fork": frozenset({"from_step", "params", "new_id"}),
    "event": frozenset({"type", "payload"}),
}


@dataclass(frozen=True)
class Done:
    """What an action did: the instance acted on, and the instance it started (replay, fork, start)."""

    action: str
    instance_id: str
    created_id: str | None = None

    @property
    def target(self) -> str:
        """The instance to show next: the new one when the action started one."""
        return self.created_id or self.instance_id


def actor_name(user: Any, origin: Origin) -> str:
    """The name the engine records in the instance's history: the user, prefixed by the
    interface when it is not the console (`api:ana`, `cli:ana`)."""
    name = str(user.get_username())
    return name if origin.source == AuditSource.WEB else f"{origin.source}:{name}"


def tenant_act_check(user: Any, tenant: str) -> None:
    """Operators (and admins) of `tenant` act; a viewer is refused (403), a non-member is told the
    tenant is not theirs (404), so other tenants' names do not leak."""
    name = user.get_username() if user is not None else ""
    if not access.can_read(user, tenant):
        raise TenantNotVisible(
            f"tenant {tenant[:100]!r} is not one of {name}'s tenants; use one of them (nothing was done)"
        )
    if not access.can_act(user, tenant):
        raise NotAnOperator(
            f"{name} is a viewer of tenant {tenant!r}; acting needs the operator role (nothing was done)"
        )


def instance_actionable(*, user: Any, instance_id: str, action: str) -> tuple[Instance, Action]:
    """The instance and the action, if `user` may take it on that instance."""
    spec = ACTIONS.get(action)
    if spec is None:
        raise UnknownAction(f"no action {action[:50]!r}; one of {', '.join(ACTIONS)}")
    instance = access.scope(Instance.objects.filter(pk=instance_id), user).first()
    if instance is None:
        name = user.get_username() if user is not None else ""
        raise InstanceNotVisible(
            f"no instance {instance_id[:100]!r} in {name}'s tenants; check the id (nothing was done)"
        )
    tenant_act_check(user, instance.tenant)
    return instance, spec


def reason_check(reason: str, *, origin: Origin) -> str:
    """A person at the console or the command line says why they act; an API client may leave
    the reason empty. Either way it is at most REASON_MAX characters."""
    if len(reason) > REASON_MAX:
        raise BadArguments(
            f"the reason is {len(reason)} characters long; at most {REASON_MAX} are kept, shorten it (nothing was done)"
        )
    if not reason.strip() and origin.source != AuditSource.API:
        raise BadArguments(
            "give a reason: it is recorded in the instance's history and the audit log (nothing was done)"
        )
    return reason


def params_check(params: Any, *, original: dict[str, Any] | None = None) -> dict[str, Any]:
    """Params are a JSON object and set no key the engine owns (a replay may keep the original's)."""
    if not isinstance(params, dict):
        raise BadArguments('params must be a JSON object, e.g. {"account": "acme"}')
    reserved_params_check(params, original=original)
    return params


def _arguments_check(spec: Action, instance: Instance, arguments: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(arguments) - ARGUMENTS[spec.name])
    if unknown:
        raise BadArguments(
            f"{spec.name} takes no argument {', '.join(unknown)}; it takes "
            f"{', '.join(sorted(ARGUMENTS[spec.name])) or 'only a reason'}"
        )
    checked = dict(arguments)
    if checked.get("params") is not None:
        checked["params"] = params_check(checked["params"], original=instance.params)
    if spec.name == "fork" and not checked.get("from_step"):
        raise BadArguments("name the step to fork from (from_step); nothing was done")
    if "rollback" in checked and not isinstance(checked["rollback"], bool):
        raise BadArguments("rollback is true or false")
    return checked


def _engine_call(
    action: str, instance: Instance, arguments: dict[str, Any], *, actor: str, reason: str
) -> Instance | object:
    common: dict[str, Any] = {"instance_id": instance.id, "actor": actor}
    match action:
        case "pause":
            return control.instance_pause(**common, reason=reason)
        case "resume":
            return control.instance_resume(**common, reason=reason)
        case "terminate":
            return control.instance_terminate(**common, reason=reason, rollback=arguments.get("rollback", False))
        case "restart":
            return control.instance_restart(**common, reason=reason, from_step=arguments.get("from_step"))
        case "retry":
            return control.instance_retry(**common, reason=reason)
        case "replay":
            return control.instance_replay(**common, reason=reason, params=arguments.get("params"))
        case "fork":
            return forks.instance_fork(
                **common,
                reason=reason,
                from_step=arguments["from_step"],
                params=arguments.get("params"),
                new_id=arguments.get("new_id"),
            )
        case "event":
            # The event itself carries no reason; the audit entry keeps it.
            return instances.instance_send_event(
                **common, type=arguments.get("type", ""), payload=arguments.get("payload")
            )
    raise UnknownAction(f"no action {action[:50]!r}")


def _selection(instance: Instance, arguments: dict[str, Any]) -> dict[str, Any]:
    """The instance and the action's own arguments for the audit entry; params and payloads are
    left out (they may be large: the new instance and the event keep them), whether a replay's or
    a fork's params differ from the original's is kept."""
    shown: dict[str, Any] = {"instance_id": instance.id}
    shown.update({k: v for k, v in arguments.items() if k not in ("params", "payload") and v is not None})
    if "params" in arguments:
        shown["edited"] = arguments["params"] is not None and arguments["params"] != instance.params
    return shown


def version_check(raw: str | None) -> str | None:
    """The version a client says it was shown: None (no check) or its digits."""
    if raw is None or raw == "":
        return None
    if not staleness.version_valid(raw):
        raise BadArguments(
            f"expected_version {raw[:40]!r} is not a version this server gave; send back "
            "the `version` a read answered (nothing was done)"
        )
    return raw


def instance_unchanged(*, instance_id: str, version: str) -> None:
    """Refuse (StaleState) when the instance moved past `version`. Takes the instance's row lock,
    so no other action lands between this check and the caller's engine call (same transaction)."""
    instance = Instance.objects.select_for_update().get(pk=instance_id)
    change = staleness.instance_change(instance=instance, version=version)
    if change is not None:
        raise StaleState(change)


def instance_act(
    *,
    user: Any,
    origin: Origin,
    instance_id: str,
    action: str,
    reason: str = "",
    arguments: dict[str, Any] | None = None,
    expected_version: str | None = None,
    audit_as: tuple[str, dict[str, Any]] | None = None,
) -> Done:
    """Take operator action `action` on an instance for `user`, from `origin`: check who may,
    the arguments and the reason, call the engine and write the audit entry in one transaction.
    With `expected_version` (what the user was shown, staleness.py), refuse when the instance
    moved since. `audit_as` records it under another name with more facts (a dead letter's retry
    is audited as `dead_letter.retry` with the dead letter's id).

    Raises ActionRefused (nothing done; StaleState when the instance moved), the engine's
    EngineError (the instance's state is in the way) or InputRejected (params set a reserved key)."""
    instance, spec = instance_actionable(user=user, instance_id=instance_id, action=action)
    checked = _arguments_check(spec, instance, arguments or {})
    reason = reason_check(reason, origin=origin)
    expected = version_check(expected_version)
    name, selection = f"instance.{spec.name}", _selection(instance, checked)
    if audit_as is not None:
        name, selection = audit_as[0], {**selection, **audit_as[1]}

    def run() -> Instance | object:
        if expected is not None:
            instance_unchanged(instance_id=instance.id, version=expected)
        return _engine_call(spec.name, instance, checked, actor=actor_name(user, origin), reason=reason)

    result = audited(user=user, origin=origin, audit=Audit(name, [instance.tenant], selection, reason), run=run)
    created = result.id if spec.name in ("replay", "fork") and isinstance(result, Instance) else None
    return Done(spec.name, instance.id, created)


def start_attributes_check(values: Any) -> dict[str, str]:
    """Search attributes a run starts with: the keys and values the engine stores (text, numbers
    or booleans), at most the engine's number of keys. Raises BadArguments naming what is wrong."""
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise BadArguments(f"search attributes are an object of key to value, not a {type(values).__name__}")
    if len(values) > attributes.MAX_KEYS:
        raise BadArguments(f"{len(values)} search attributes given; a run has at most {attributes.MAX_KEYS}")
    if empty := [str(k) for k, v in values.items() if v is None]:
        raise BadArguments(f"search attribute {empty[0][:60]!r} has no value; give one, or leave the key out")
    try:
        checked = attributes.attributes_check(values)
    except InvalidSearchAttributes as exc:
        raise BadArguments(str(exc)) from None
    return {k: v for k, v in checked.items() if v is not None}


def instance_start(
    *,
    user: Any,
    origin: Origin,
    workflow: str,
    params: Any,
    tenant: str,
    id: str | None = None,
    priority: int = 0,
    start_at: datetime | None = None,
    callback_url: str | None = None,
    search_attributes: Any = None,
) -> Done:
    """Start a run of `workflow` by hand: the same tenant rule and params rule as every action,
    the instance, its search attributes, its callback and the audit entry in one transaction (a
    refused callback URL starts nothing)."""
    tenant_act_check(user, tenant)
    checked = params_check(params)
    tags = start_attributes_check(search_attributes)
    if not PRIORITY_RANGE[0] <= priority <= PRIORITY_RANGE[1]:
        raise BadArguments(
            f"priority {priority} is out of range; use {PRIORITY_RANGE[0]} to {PRIORITY_RANGE[1]} (higher runs first)"
        )
    with transaction.atomic():
        created = instances.instance_create(
            workflow=workflow,
            id=id,
            params=checked,
            tenant=tenant,
            priority=priority,
            start_at=start_at,
            actor=actor_name(user, origin),
        )
        if tags:
            attributes.attributes_set(instance_id=created.id, values=tags)
        if callback_url is not None:
            source = origin.source if origin.source in CallbackSource.values else CallbackSource.API
            callback_register(
                instance_id=created.id, tenant=tenant, url=callback_url, source=source, now=timezone.now()
            )
        audit_record(
            user=user,
            origin=origin,
            affected=1,
            audit=Audit(
                "instance.start",
                [tenant],
                {"workflow": workflow, "instance_id": created.id, **({"search_attributes": tags} if tags else {})},
            ),
        )
    return Done("start", created.id, created.id)


def fork_points(*, instance_id: str) -> list[str]:
    """The steps an instance can be forked from (for the fork form's choices)."""
    return forks.fork_points(instance_id=instance_id)
