"""The OpenAPI response links: which answer names the resource the next call acts on.

Start an instance (or replay, fork, run a schedule, publish an event) and its answer's id is the
`instance_id` of every instance operation; create an alert rule or channel and its id is the
path of its update; preview a bulk action and its batch is the path of its confirmation.
"""

from __future__ import annotations

from typing import Any

P = "dashboard_api_"
INSTANCE_OPERATIONS = (
    "instances_instance_get",
    "instances_instance_history",
    "instances_instance_pause",
    "instances_instance_resume",
    "instances_instance_terminate",
    "instances_instance_restart",
    "instances_instance_retry",
    "instances_instance_replay",
    "instances_instance_fork",
    "instances_instance_send_event",
    "alerts_instance_callback_get",
    "alerts_instance_callback_set",
)

SCHEDULE_OPERATIONS = (
    "schedules_schedule_get",
    "schedules_schedule_edit",
    "schedules_schedule_run",
    "schedules_schedule_enable",
    "schedules_schedule_disable",
    "schedules_schedule_delete_view",
)
ROUTE_OPERATIONS = (
    "routes_route_get",
    "routes_route_edit",
    "routes_route_coalesce",
    "routes_route_enable",
    "routes_route_disable",
    "routes_route_delete_view",
)
SUBSCRIPTION_OPERATIONS = (
    "subscriptions_subscription_get",
    "subscriptions_subscription_edit",
    "subscriptions_subscription_coalesce",
    "subscriptions_subscription_enable",
    "subscriptions_subscription_disable",
    "subscriptions_subscription_delete_view",
)


def _to(operations: tuple[str, ...], parameter: str, expression: str) -> dict[str, dict[str, Any]]:
    return {
        operation.split("_", 1)[1]: {
            "operationId": P + operation,
            "parameters": {parameter: expression},
        }
        for operation in operations
    }


def _instances(expression: str) -> dict[str, dict[str, Any]]:
    return _to(INSTANCE_OPERATIONS, "instance_id", expression)


LINKS: dict[tuple[str, str], dict[str, dict[str, Any]]] = {
    (P + "instances_instance_start", "201"): _instances("$response.body#/id"),
    (P + "instances_instance_replay", "201"): _instances("$response.body#/id"),
    (P + "instances_instance_fork", "201"): _instances("$response.body#/id"),
    (P + "instances_instance_list", "200"): _instances("$response.body#/items/0/id"),
    (P + "schedules_schedule_run", "201"): _instances("$response.body#/instance_id"),
    (P + "operations_event_publish_view", "202"): _instances("$response.body#/started/0"),
    (P + "schedules_schedule_list", "200"): _to(SCHEDULE_OPERATIONS, "name", "$response.body#/0/name"),
    (P + "workflows_workflow_list", "200"): _to(
        ("workflows_workflow_get", "workflows_version_list"), "name", "$response.body#/0/name"
    ),
    (P + "workflows_version_list", "200"): {
        "version_retire": {
            "operationId": P + "workflows_version_retire",
            "parameters": {"name": "$request.path.name", "version": "$response.body#/0/version"},
        }
    },
    (P + "alerts_rule_create", "201"): {
        **_to(("alerts_rule_update",), "rule_id", "$response.body#/id"),
        **{
            f"rule_{action}": {
                "operationId": P + "alerts_rule_toggle",
                "parameters": {"rule_id": "$response.body#/id", "action": action},
            }
            for action in ("enable", "disable")
        },
    },
    (P + "alerts_channel_create", "201"): _to(
        ("alerts_channel_update", "alerts_channel_send_test"), "channel_id", "$response.body#/id"
    ),
    (P + "dead_letters_dead_letter_list", "200"): _to(
        ("dead_letters_dead_letter_retry", "dead_letters_dead_letter_discard"), "dead_letter_id", "$response.body#/0/id"
    ),
    (P + "bulk_bulk_preview", "201"): _to(("bulk_bulk_confirm", "bulk_bulk_get"), "batch_id", "$response.body#/batch"),
    (P + "routes_route_list", "200"): {
        **_to(ROUTE_OPERATIONS, "name", "$response.body#/0/name"),
        **_to(("alerts_route_callback_set",), "route", "$response.body#/0/name"),
    },
    (P + "routes_route_create_view", "201"): _to(ROUTE_OPERATIONS, "name", "$response.body#/name"),
    (P + "schedules_schedule_create_view", "201"): _to(SCHEDULE_OPERATIONS, "name", "$response.body#/name"),
    (P + "subscriptions_subscription_list", "200"): _to(SUBSCRIPTION_OPERATIONS, "sub_id", "$response.body#/0/id"),
    (P + "subscriptions_subscription_create_view", "201"): _to(SUBSCRIPTION_OPERATIONS, "sub_id", "$response.body#/id"),
    (P + "credentials_credential_list", "200"): {
        "credential_rotate": {
            "operationId": P + "credentials_credential_rotate",
            "parameters": {"tenant": "$response.body#/0/tenant", "name": "$response.body#/0/name"},
        }
    },
    (P + "credentials_credential_create", "201"): {
        "credential_rotate": {
            "operationId": P + "credentials_credential_rotate",
            "parameters": {"tenant": "$response.body#/tenant", "name": "$response.body#/name"},
        }
    },
}
