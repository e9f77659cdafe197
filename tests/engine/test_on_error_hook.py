"""The `on_error` hook: a durable step (retries, history) run once when an instance errors or is
terminated, its outcome in the origin's history, the origin ended at once all the same."""

from __future__ import annotations

from collections import Counter

import pytest

from ingest.engine import NonRetryableError, Workflow, create
from ingest.engine.hooks import HOOK_WORKFLOW, hook_instance_id
from ingest.engine.models import Attempt, History, Instance, Step
from ingest.engine.services.control import instance_retry, instance_terminate

pytestmark = pytest.mark.db
CALLS: Counter[str] = Counter()
SEEN: list[dict] = []
FLAKY: dict[str, int] = {}


@pytest.fixture(autouse=True)
def _reset():
    CALLS.clear()
    SEEN.clear()
    FLAKY.clear()


class Charge(Workflow):
    name = "t-hook-charge"
    sensitive_params = ("card",)
    on_error_retries = {"limit": 3, "delay": "10 seconds", "backoff": "constant"}

    def run(self, event, step):
        step.do("reserve", lambda ctx: "r-1")
        if event.payload.get("wait"):
            step.sleep("settle", "1 hour")
        step.do("charge", lambda ctx: (_ for _ in ()).throw(NonRetryableError("card declined")))

    def on_error(self, ctx, failure):
        CALLS[failure["instance_id"]] += 1
        SEEN.append({**failure, "key": ctx.idempotency_key})
        if FLAKY.get(failure["instance_id"], 0) > 0:
            FLAKY[failure["instance_id"]] -= 1
            raise RuntimeError("the notifier is down")
        return {"released": failure["params"].get("card")}


class NoHook(Workflow):
    name = "t-hook-none"

    def run(self, event, step):
        raise RuntimeError("boom")


def hook_history(iid: str) -> list[tuple[str, str]]:
    return [
        (h["data"]["state"], h["data"]["instance"])
        for h in History.objects.filter(instance_id=iid, kind="hook").order_by("id").values("data")
    ]


@pytest.mark.django_db
def test_an_errored_instance_runs_its_hook_once_as_a_step_with_the_failure(drain):
    h = create("t-hook-charge", id="chg-1", params={"card": "4242"})
    drain()
    assert h.status()["status"] == "errored"
    hid = hook_instance_id("chg-1", 0)
    hook = Instance.objects.get(id=hid)
    assert (hook.workflow, hook.status, hook.output) == (HOOK_WORKFLOW, "complete", {"released": "4242"})
    assert CALLS["chg-1"] == 1
    seen = SEEN[0]
    assert (seen["status"], seen["error"]["name"], seen["failed_step"]) == ("errored", "NonRetryableError", "charge")
    assert seen["key"] == f"{hid}:on-error:1"  # a stable key for the hook's own outside calls
    assert hook_history("chg-1") == [("scheduled", hid), ("complete", hid)]
    kinds = list(History.objects.filter(instance_id="chg-1").order_by("id").values_list("kind", "status"))
    assert kinds[-3:] == [("instance.status", "errored"), ("hook", ""), ("hook", "complete")]
    assert "4242" not in str(hook.params)  # the sensitive param is read from the origin, not copied
    drain()
    assert CALLS["chg-1"] == 1


@pytest.mark.django_db
def test_a_failing_hook_is_retried_with_its_delays_and_each_attempt_is_recorded(drain):
    FLAKY["chg-2"] = 2
    create("t-hook-charge", id="chg-2")
    drain(advance_clock=True)
    hid = hook_instance_id("chg-2", 0)
    step = Step.objects.get(instance_id=hid, name="on-error")
    attempts = list(Attempt.objects.filter(step=step).order_by("number").values_list("ok", "retry_delay_seconds"))
    assert attempts == [(False, 10.0), (False, 10.0), (True, None)]
    assert Instance.objects.get(id=hid).status == "complete" and CALLS["chg-2"] == 3


@pytest.mark.django_db
def test_a_hook_that_exhausts_its_retries_errors_and_says_so_in_the_origins_history(drain):
    FLAKY["chg-3"] = 99
    create("t-hook-charge", id="chg-3")
    drain(advance_clock=True)
    hid = hook_instance_id("chg-3", 0)
    assert Instance.objects.get(id=hid).status == "errored" and CALLS["chg-3"] == 4
    assert hook_history("chg-3") == [("scheduled", hid), ("errored", hid)]
    last = History.objects.filter(instance_id="chg-3", kind="hook").order_by("-id").first()
    assert "the notifier is down" in last.data["error"]


@pytest.mark.django_db
def test_termination_ends_the_instance_at_once_and_schedules_the_hook(drain):
    h = create("t-hook-charge", id="chg-4", params={"wait": True})
    drain()
    assert h.status()["status"] == "waiting"
    instance_terminate(instance_id="chg-4", actor="ops")
    assert h.status()["status"] == "terminated"
    drain()
    assert h.status()["status"] == "terminated"
    assert SEEN[0]["status"] == "terminated" and SEEN[0]["error"] is None
    assert Instance.objects.get(id=hook_instance_id("chg-4", 0)).status == "complete"


@pytest.mark.django_db
def test_a_retried_instance_that_errors_again_does_not_run_the_hook_twice(drain):
    create("t-hook-charge", id="chg-5")
    drain()
    instance_retry(instance_id="chg-5", actor="ops")
    drain()
    assert Instance.objects.get(id="chg-5").status == "errored"
    assert CALLS["chg-5"] == 1
    assert Instance.objects.filter(workflow=HOOK_WORKFLOW).count() == 1


@pytest.mark.django_db
def test_a_workflow_without_a_hook_schedules_nothing(drain):
    create("t-hook-none", id="none-1")
    drain()
    assert not Instance.objects.filter(workflow=HOOK_WORKFLOW).exists()
    assert not History.objects.filter(kind="hook").exists()


@pytest.mark.pure
def test_a_long_origin_id_still_gives_a_valid_hook_id():
    hid = hook_instance_id("x" * 100, 3)
    assert len(hid) <= 100 and hid != hook_instance_id("x" * 99 + "y", 3)
    assert hook_instance_id("a", 2) == "a-on-error-g2"


@pytest.mark.django_db
def test_the_origins_page_shows_the_hook_scheduled_and_its_outcome_linked(drain):
    from django.test import Client

    from dashboard.access import demo_users_ensure

    demo_users_ensure()
    client = Client()
    assert client.login(username="operator", password="operator")
    create("t-hook-charge", id="chg-page", tenant="acme")
    drain()
    hid = hook_instance_id("chg-page", 0)
    page = client.get("/instances/chg-page/").content.decode()
    assert "on_error hook scheduled" in page and "on_error hook complete" in page
    assert f'href="/instances/{hid}/"' in page
    assert client.get(f"/instances/{hid}/").status_code == 200
