"""A workflow of paid steps, for the tests of the call journal (a paid call is paid once).

`e2e-paid` runs three steps, each one paid call to a local fake provider and its cost booked:
`llm` (an OpenAI-compatible chat completion), `dataforseo` (backlinks) and `zenrows` (a page).
The worker processes of the chaos test import it (RUNLEDGER_WORKFLOW_MODULES); the in-process
tests register it by importing it.

Where a step dies is in its params, so the kill lands exactly where the test wants it, once per
step: `die` maps a step name to "answer" (right after the provider's answer came back, before
its cost is booked) or "booked" (after the cost is booked, before the step returns, so before
its completion commits). `how` is "kill" (SIGKILL of the worker process) or "exit" (SystemExit,
which the engine does not catch: the in-process tests' crash, `crash_and_take_over`). A step dies on its first run
only: it leaves a file in `marks` (a directory) before dying, and a run that finds it goes on.
With `cache`, the DataForSEO client keeps its answers (ingest/rankdisco/answer_cache.py).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from ingest.engine import Workflow, now
from ingest.engine.models import Attempt, Instance
from ingest.rankdisco.answer_cache import TenantAnswerCache
from ingest.sources.dataforseo import DataForSEOClient
from ingest.sources.http import RateLimiter
from ingest.sources.llm import OpenAIChatClient
from ingest.sources.outbound import InProcess
from ingest.sources.zenrows import ZenRowsClient

PAID_STEPS = ("llm", "dataforseo", "zenrows")


def _die_here(params: dict[str, Any], ctx: Any, where: str) -> None:
    if params.get("die", {}).get(ctx.name) != where:
        return
    mark = Path(params["marks"]) / f"{ctx.instance_id}-{ctx.name}"
    if mark.exists():
        return
    mark.write_text(str(os.getpid()))
    if params.get("how", "kill") == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise SystemExit(f"{ctx.instance_id} died in step {ctx.name} after its {where}")


def _llm(params: dict[str, Any], ctx: Any) -> dict[str, Any]:
    client = OpenAIChatClient(
        base_url=f"{params['llm_url']}/v1", api_key="sk-fake", model="gpt-4o-mini", service="openai"
    )
    result = client.complete_json(
        [
            {"role": "system", "content": "Extract facts as JSON."},
            {"role": "user", "content": f"Account: {ctx.instance_id}\nWe signed for $40k."},
        ]
    )
    _die_here(params, ctx, "answer")
    ctx.track_cost(result.usage.service, metadata={"step": ctx.name}, **result.usage.as_track_cost_kwargs())
    _die_here(params, ctx, "booked")
    return {"facts": len(result.data.get("facts", [])), "tokens_in": result.usage.input_tokens}


def _dataforseo(params: dict[str, Any], ctx: Any) -> dict[str, Any]:
    client = DataForSEOClient(
        login="dfs-login",
        password="dfs-password",
        base_url=params["dfs_url"],
        limiter=InProcess(RateLimiter(1000)),
        cache=TenantAnswerCache() if params.get("cache") else None,
    )
    call = client.backlinks(params.get("domain", "paid.example"), limit=5)
    _die_here(params, ctx, "answer")
    kwargs = call.track_cost_kwargs()
    ctx.track_cost(kwargs.pop("service"), **kwargs)
    _die_here(params, ctx, "booked")
    return {"items": call.result.items_count, "task_id": call.metadata["task_id"]}


def _zenrows(params: dict[str, Any], ctx: Any) -> dict[str, Any]:
    client = ZenRowsClient(api_key="zr-key", base_url=f"{params['zr_url']}/v1/")
    call = client.fetch(f"https://{params.get('domain', 'paid.example')}/pricing")
    _die_here(params, ctx, "answer")
    kwargs = call.track_cost_kwargs()
    ctx.track_cost(kwargs.pop("service"), **kwargs)
    _die_here(params, ctx, "booked")
    return {"chars": len(call.result.html), "cost": str(call.cost)}


def crash_and_take_over(drain: Callable[..., Any], iid: str) -> None:
    """In-process: drain until a step dies ("exit"), then let the instance's lease expire so
    the next drain takes it over, as another worker takes over a dead worker's instances.

    The clock is advanced over retry delays: an attempt that failed before its step could die
    (a provider call refused on a loaded machine, say) is retried in the same drain, as a worker
    would a second later, instead of ending the drain with nothing dead."""
    try:
        drain(advance_clock=True)
    except SystemExit:
        _markers_die_with_the_process()
        Instance.objects.filter(id=iid).update(lease_expires_at=now() - timedelta(seconds=1))
        return
    attempts = Attempt.objects.filter(step__instance_id=iid).select_related("step").order_by("id")
    tried = "; ".join(f"{a.step.name}#{a.number} {a.error_name}: {a.error_message[:200]}" for a in attempts)
    raise AssertionError(f"no step of {iid} died (attempts: {tried or 'none'})")


def _markers_die_with_the_process() -> None:
    """A running step's start marker (runtime/markers.py) is written by its process's marker
    thread, which a dead worker takes with it. In-process, the thread lives on: cancel what it has
    not written yet, or it writes (or tries) later, beside the teardown's truncation of the tables
    (a deadlock seen under load)."""
    from ingest.engine.runtime import markers

    with markers._markers.cond:
        for marker in markers._markers._queue:
            if marker.state == markers.PENDING:
                marker.state = markers.CANCELLED


class PaidSteps(Workflow):
    name = "e2e-paid"

    def run(self, event: Any, step: Any) -> dict[str, Any]:
        params = dict(event.payload)
        steps = params.get("steps", PAID_STEPS)
        bodies = {"llm": _llm, "dataforseo": _dataforseo, "zenrows": _zenrows}
        return {
            name: step.do(
                name,
                lambda ctx, name=name: bodies[name](params, ctx),
                retries={"limit": 3, "delay": "1 second"},
                sensitive=bool(params.get("sensitive")),
            )
            for name in steps
        }
