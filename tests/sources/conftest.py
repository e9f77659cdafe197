from tests.fakes.fixtures import fake_anthropic, fake_gong, fake_openai, fake_salesforce  # noqa: F401
