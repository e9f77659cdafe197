"""Local fake servers speaking the real wire formats of Gong, Salesforce and LLM providers.

Each fake is a ThreadingHTTPServer on 127.0.0.1 (port 0) in a daemon thread; use it as a
context manager or through the pytest fixtures in `tests.fakes.fixtures`.
"""

from tests.fakes.dataforseo import FakeDataForSEO
from tests.fakes.gong import FakeGong
from tests.fakes.llm import FakeAnthropic, FakeOpenAI
from tests.fakes.salesforce import FakeSalesforce
from tests.fakes.server import FakeServer, Planned, Recorded
from tests.fakes.zenrows import FakeZenRows

__all__ = [
    "FakeAnthropic",
    "FakeDataForSEO",
    "FakeGong",
    "FakeOpenAI",
    "FakeSalesforce",
    "FakeServer",
    "FakeZenRows",
    "Planned",
    "Recorded",
]
