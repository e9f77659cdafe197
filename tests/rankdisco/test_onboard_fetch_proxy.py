"""domain-onboard's page fetches go out through the egress proxy url-classify's fetches use
(`RUNLEDGER_FETCH_PROXY`), with the clients built from the environment as a worker builds them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ingest.engine import get
from ingest.rankdisco.models import RankedKeyword
from ingest.workflows.domain_onboard import clients_install, domain_onboard_start
from ingest.workflows.domain_onboard.steps import brand_pages
from ingest.workflows.url_classify.clients import clients_clear
from tests.fakes.dataforseo import FakeDataForSEO

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


class RecordingProxy:
    """An HTTP proxy on 127.0.0.1 that keeps the target of every request it receives (the
    `CONNECT host:443` of an https fetch, the absolute URL of an http one) and forwards none."""

    def __init__(self) -> None:
        self.targets: list[str] = []
        lock = threading.Lock()
        targets = self.targets

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _refuse(self) -> None:
                with lock:
                    targets.append(f"{self.command} {self.path}")
                self.send_response(502)
                self.send_header("Content-Length", "0")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True

            do_CONNECT = do_GET = _refuse

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def proxy() -> Iterator[RecordingProxy]:
    with RecordingProxy() as server:
        yield server


@pytest.fixture
def env_clients(monkeypatch: pytest.MonkeyPatch, dataforseo: FakeDataForSEO, proxy: RecordingProxy) -> Iterator[None]:
    """No installed factory: the clients come from the environment, DataForSEO on its fake,
    no ZenRows key (the native fetch alone), the egress proxy set."""
    for name in ("RUNLEDGER_ZENROWS_API_KEY", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RUNLEDGER_DATAFORSEO_LOGIN", "dfs-login")
    monkeypatch.setenv("RUNLEDGER_DATAFORSEO_PASSWORD", "dfs-password")
    monkeypatch.setenv("RUNLEDGER_DATAFORSEO_BASE_URL", dataforseo.url)
    monkeypatch.setenv("RUNLEDGER_FETCH_PROXY", proxy.url)
    clients_install(None)
    clients_clear()
    yield
    clients_install(None)
    clients_clear()


def test_every_brand_page_fetch_goes_through_the_configured_proxy(
        env_clients: None, proxy: RecordingProxy, dataforseo: FakeDataForSEO, drain: Any) -> None:  # fmt: skip
    iid, _ = domain_onboard_start("acme", "acme.example", backlink_limit=5, keyword_limit=20, referring_domains_limit=5)
    drain()
    status = get(iid).status()
    assert status["status"] == "complete", status
    ranking = list(
        RankedKeyword.objects.filter(domain__name="acme.example").exclude(url="").values_list("url", flat=True)
    )
    pages = brand_pages("acme.example", ranking, home=True, ranking=True)
    assert len(pages) > 1  # the home page and ranking pages
    # Each page was asked of the proxy (https: a tunnel to its host), none went out directly;
    # the proxy refused them all, so none was read.
    assert len(proxy.targets) == len(pages)
    assert set(proxy.targets) <= {f"CONNECT {p.split('/')[2]}:443" for p in pages}
    assert "CONNECT acme.example:443" in proxy.targets
    assert status["output"]["metrics"]["ranking_domains_scraped"] == 0
    # DataForSEO is an API, not a page fetch: it is called directly, never through the proxy.
    assert dataforseo.count() > 0 and not any(dataforseo.url.split("//")[1] in t for t in proxy.targets)
