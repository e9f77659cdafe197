from __future__ import annotations

import pytest

from ingest.sources.salesforce import (
    ApiUsage,
    ClientCredentials,
    RefreshToken,
    SalesforceAuthError,
    SalesforceClient,
    SalesforceLimitExceeded,
    SalesforceRequestRejected,
    SalesforceServerError,
    SalesforceSessionExpired,
    parse_limit_info,
)
from tests.fakes import FakeSalesforce, Planned
from tests.fakes.salesforce import QUERY_ROUTE, TOKEN_ROUTE, sf_error

pytestmark = pytest.mark.pure

SOQL = "SELECT Id, Name, StageName, Amount, CloseDate, Description, Notes__c FROM Opportunity"


def client_for(fake: FakeSalesforce, *, refresh: bool = False) -> SalesforceClient:
    credentials: ClientCredentials | RefreshToken = (
        RefreshToken("sf-client", "sf-secret", "sf-refresh") if refresh else ClientCredentials("sf-client", "sf-secret")
    )
    return SalesforceClient(credentials=credentials, login_url=fake.url)


def test_it_follows_next_records_url_until_done(fake_salesforce: FakeSalesforce) -> None:
    records = list(client_for(fake_salesforce).query(SOQL))

    assert [r["Id"] for r in records] == [o.id for o in fake_salesforce.opportunities]
    assert fake_salesforce.count() == 1 + 3  # one token, three pages of 2, 2, 1
    assert records[0]["StageName"] == fake_salesforce.opportunities[0].stage_name


def test_it_gets_a_token_with_the_client_credentials_flow(fake_salesforce: FakeSalesforce) -> None:
    client_for(fake_salesforce).query_page(SOQL)

    form = fake_salesforce.requests_to(TOKEN_ROUTE)[0].form()
    assert form == {
        "grant_type": "client_credentials",
        "client_id": "sf-client",
        "client_secret": "sf-secret",
    }
    query = fake_salesforce.requests_to(QUERY_ROUTE)[0]
    assert query.header("Authorization") == "Bearer 00DFAKE!token-1"
    assert query.query["q"] == [SOQL]


def test_it_refreshes_an_expired_session_once_and_retries(fake_salesforce: FakeSalesforce) -> None:
    client = client_for(fake_salesforce, refresh=True)
    client.query_page(SOQL)
    fake_salesforce.expire_tokens()

    page = client.query_page(SOQL)

    assert len(page.records) == 2
    assert fake_salesforce.tokens_issued == 2
    assert fake_salesforce.requests_to(TOKEN_ROUTE)[1].form()["grant_type"] == "refresh_token"


def test_a_session_that_stays_invalid_is_not_refreshed_twice(
    fake_salesforce: FakeSalesforce,
) -> None:
    invalid = sf_error(401, "INVALID_SESSION_ID", "Session expired or invalid")
    fake_salesforce.plan(QUERY_ROUTE, invalid, invalid, invalid)

    with pytest.raises(SalesforceSessionExpired):
        client_for(fake_salesforce).query_page(SOQL)

    assert fake_salesforce.tokens_issued == 2
    assert fake_salesforce.count(QUERY_ROUTE) == 2


def test_request_limit_exceeded_is_retryable(fake_salesforce: FakeSalesforce) -> None:
    fake_salesforce.plan(QUERY_ROUTE, sf_error(403, "REQUEST_LIMIT_EXCEEDED", "TotalRequests Limit exceeded."))

    with pytest.raises(SalesforceLimitExceeded) as caught:
        client_for(fake_salesforce).query_page(SOQL)

    assert caught.value.retryable and caught.value.retry_after and caught.value.retry_after > 0
    assert "REQUEST_LIMIT_EXCEEDED" in str(caught.value)


def test_the_org_running_out_of_api_calls_raises_limit_exceeded() -> None:
    with FakeSalesforce(api_limit=2) as fake:
        with pytest.raises(SalesforceLimitExceeded) as caught:
            list(client_for(fake).query(SOQL))

        assert "last seen usage 2/2" in str(caught.value)


def test_it_records_the_last_seen_api_usage(fake_salesforce: FakeSalesforce) -> None:
    client = client_for(fake_salesforce)
    list(client.query(SOQL))

    assert client.api_usage == ApiUsage(used=3, limit=15000)


def test_limit_info_parses_with_per_app_usage() -> None:
    assert parse_limit_info("api-usage=25/15000") == ApiUsage(25, 15000)
    assert parse_limit_info("api-usage=18/5000, per-app-api-usage=17/250(appName=sample)") == ApiUsage(18, 5000)
    assert parse_limit_info(None) is None


def test_a_malformed_query_is_not_retryable(fake_salesforce: FakeSalesforce) -> None:
    with pytest.raises(SalesforceRequestRejected) as caught:
        client_for(fake_salesforce).query_page("SELECT Id FROM Widget__x")

    assert not caught.value.retryable and "INVALID_TYPE" in str(caught.value)


def test_a_server_error_is_retryable(fake_salesforce: FakeSalesforce) -> None:
    fake_salesforce.plan(QUERY_ROUTE, Planned(503, [{"message": "down", "errorCode": "SERVER_UNAVAILABLE"}]))

    with pytest.raises(SalesforceServerError) as caught:
        client_for(fake_salesforce).query_page(SOQL)

    assert caught.value.retryable


def test_bad_client_credentials_are_not_retryable(fake_salesforce: FakeSalesforce) -> None:
    client = SalesforceClient(credentials=ClientCredentials("sf-client", "wrong"), login_url=fake_salesforce.url)

    with pytest.raises(SalesforceAuthError) as caught:
        client.query_page(SOQL)

    assert not caught.value.retryable and "invalid_client" in str(caught.value)


def test_it_reads_one_record_with_selected_fields(fake_salesforce: FakeSalesforce) -> None:
    opp = fake_salesforce.opportunities[3]

    record = client_for(fake_salesforce).record("Opportunity", opp.id, ["Name", "Amount"])

    assert record["Id"] == opp.id and record["Amount"] == opp.amount
    assert fake_salesforce.requests[-1].query["fields"] == ["Name,Amount"]
