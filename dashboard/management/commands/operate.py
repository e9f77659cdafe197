"""`manage.py operate --as USER ...`: the operator actions from the command line, with the same
tenant rules as the dashboard and one audit entry each (source "cli"). Instance actions go through
`dashboard.actions`, the service the console and the REST API call.

    operate --as ana instance pause|resume|terminate|restart|retry ID --reason "..."
    operate --as ana instance replay ID --reason "..." [--params JSON]
    operate --as ana instance fork ID --from-step STEP --reason "..." [--params JSON] [--new-id ID]
    operate --as ana instance event ID --type TYPE [--payload JSON] --reason "..."
    operate --as ana discard DEAD_LETTER_ID --reason "..."
    operate --as ana redrive (--ids 4,7 | --all-matching [--tenant T --workflow W --step-name S
                              --signature X]) --reason "..." [--rate 5] [--confirm DIGEST]

A redrive without --confirm only previews: it prints the count and a digest of the selected ids;
run it again with --confirm DIGEST to act, and it acts only if the selection is still that set.
"""

from __future__ import annotations

import hashlib
import json
from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from dashboard import access, actions, selection
from dashboard.audit import Origin
from dashboard.dead_letter_actions import dead_letter_act, dead_letters_redrive
from ingest.engine import EngineError
from ingest.engine.models import DeadLetter
from ingest.engine.services import dead_letters as engine_dead_letters
from ingest.engine.services.dead_letters import DeadLetterFilter
from ingest.triggers.errors import InputRejected

INSTANCE_ACTIONS = tuple(actions.ARGUMENTS)


def selection_digest(ids: list[int]) -> str:
    return hashlib.sha256(",".join(map(str, sorted(ids))).encode()).hexdigest()[:12]


class Command(BaseCommand):
    help = "Act on instances and dead letters as an operator (audited, tenant-checked)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--as", dest="username", required=True, help="the operator acting")
        sub = parser.add_subparsers(dest="what", required=True)
        inst = sub.add_parser("instance")
        inst.add_argument("action", choices=INSTANCE_ACTIONS)
        inst.add_argument("instance_id")
        inst.add_argument("--reason", required=True)
        inst.add_argument("--rollback", action="store_true")
        inst.add_argument("--from-step", default=None, help="restart or fork from this step")
        inst.add_argument("--params", default=None, help="replay or fork: the new params, a JSON object")
        inst.add_argument("--new-id", default=None, help="fork: the new instance's id")
        inst.add_argument("--type", default=None, help="event: the event's type")
        inst.add_argument("--payload", default=None, help="event: its payload, JSON")
        inst.add_argument(
            "--expected-version",
            default=None,
            help="refuse when the instance moved past this version (its API `version`)",
        )
        discard = sub.add_parser("discard")
        discard.add_argument("dead_letter_id", type=int)
        discard.add_argument("--reason", required=True)
        discard.add_argument(
            "--expected-version",
            default=None,
            help="refuse when the dead letter moved past this version (its API `version`)",
        )
        redrive = sub.add_parser("redrive")
        redrive.add_argument("--ids", default=None, help="comma-separated dead letter ids")
        redrive.add_argument(
            "--all-matching", action="store_true", help="every open dead letter matching the filters below"
        )
        for name in ("tenant", "workflow", "step-name", "signature"):
            redrive.add_argument(f"--{name}", default=None)
        redrive.add_argument("--rate", type=float, default=5.0)
        redrive.add_argument("--reason", required=True)
        redrive.add_argument("--confirm", default="", help="the digest a preview printed")

    def handle(self, *args: Any, **o: Any) -> None:
        user = get_user_model().objects.filter(username=o["username"], is_active=True).first()
        if user is None:
            raise CommandError(f"no active user {o['username']!r}")
        try:
            match o["what"]:
                case "instance":
                    self._instance(user, o)
                case "discard":
                    self._discard(user, o)
                case "redrive":
                    self._redrive(user, o)
        except (EngineError, actions.ActionRefused, InputRejected) as exc:
            raise CommandError(str(exc)) from None

    def _acting(self, user: Any, tenant: str, what: str) -> None:
        if not access.can_read(user, tenant):
            raise CommandError(f"no {what} in {user.get_username()}'s tenants; nothing was done")
        if not access.can_act(user, tenant):
            raise CommandError(f"{user.get_username()} is not an operator of tenant {tenant!r}")

    def _instance(self, user: Any, o: dict[str, Any]) -> None:
        arguments: dict[str, Any] = {}
        match o["action"]:
            case "terminate":
                arguments["rollback"] = o["rollback"]
            case "restart":
                arguments["from_step"] = o["from_step"]
            case "replay":
                arguments["params"] = _json(o["params"], what="--params")
            case "fork":
                arguments.update(
                    from_step=o["from_step"], params=_json(o["params"], what="--params"), new_id=o["new_id"]
                )
            case "event":
                arguments.update(type=o["type"] or "", payload=_json(o["payload"], what="--payload"))
        done = actions.instance_act(
            user=user,
            origin=Origin.cli(),
            instance_id=o["instance_id"],
            action=o["action"],
            reason=o["reason"],
            arguments=arguments,
            expected_version=o["expected_version"],
        )
        created = f" -> {done.created_id}" if done.created_id else ""
        self.stdout.write(f"{o['action']}: {o['instance_id']}{created}")

    def _discard(self, user: Any, o: dict[str, Any]) -> None:
        done = dead_letter_act(
            user=user,
            origin=Origin.cli(),
            dead_letter_id=o["dead_letter_id"],
            action="discard",
            reason=o["reason"],
            expected_version=o["expected_version"],
        )
        self.stdout.write(f"discarded: dead letter {done.dead_letter_id}")

    def _redrive(self, user: Any, o: dict[str, Any]) -> None:
        if (o["ids"] is None) == (not o["all_matching"]):
            raise CommandError("name the selection: --ids 4,7 or --all-matching (with filters); nothing was done")
        ids: list[int] | None = None
        if o["ids"] is not None:
            try:
                ids = selection.ids_parse([o["ids"]])
            except selection.SelectionError as exc:
                raise CommandError(str(exc)) from None
            found = dict(DeadLetter.objects.filter(id__in=ids).values_list("id", "tenant"))
            unseen = [i for i in ids if not access.can_read(user, found.get(i, ""))]
            if unseen:
                raise CommandError(f"no dead letter {unseen[:5]} in {user.get_username()}'s tenants; nothing was done")
            for tenant in set(found.values()):
                self._acting(user, tenant, f"tenant {tenant!r}")
        if o["tenant"]:
            self._acting(user, o["tenant"], f"tenant {o['tenant']!r}")
        tenants = [o["tenant"]] if o["tenant"] else access.acting_tenants(user)
        scope = DeadLetterFilter(
            tenants=tuple(tenants), workflow=o["workflow"], step_name=o["step_name"], signature=o["signature"]
        )
        chosen = list(engine_dead_letters.dead_letter_select(filter=scope, ids=ids).values_list("id", flat=True))
        if not chosen:
            self.stdout.write("0 open dead letters selected; nothing to redrive")
            return
        digest = selection_digest(chosen)
        if o["confirm"] != digest:
            if o["confirm"]:
                raise CommandError(
                    f"the selection changed since the preview: it is now {len(chosen)} "
                    f"dead letter(s), digest {digest}; nothing was done"
                )
            self.stdout.write(
                f"{len(chosen)} open dead letter(s) selected: {chosen[:50]}\n"
                f"to redrive exactly these, run again with --confirm {digest}"
            )
            return
        filters = {k: o[k] for k in ("tenant", "workflow", "step_name", "signature") if o[k]}
        count = dead_letters_redrive(
            user=user,
            origin=Origin.cli(),
            ids=chosen,
            scope=scope,
            rate_per_second=o["rate"],
            reason=o["reason"],
            selection={"ids": chosen} if ids is not None else {"filter": filters},
            tenants=set(DeadLetter.objects.filter(id__in=chosen).values_list("tenant", flat=True)),
        )
        self.stdout.write(f"redriven: {count}")


def _json(raw: str | None, *, what: str) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{what} is not valid JSON ({exc.msg}); nothing was done") from None
