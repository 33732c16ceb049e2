"""Schema-driven fuzzing of the whole app: schemathesis generates requests (valid and
invalid bodies, headers, path parameters, other methods) from the app's OpenAPI document
(`create_app(...).openapi()`, what the server serves at /openapi.json) and sends them to
the real server; no response may be a 5xx, every response must match its documented
status, content type and schema. Bounded: a fixed number of examples per route,
derandomised so a run is repeatable."""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from service_testing import wait_for_jobs

from attnswitch.service import ServiceConfig, create_app

pytestmark = pytest.mark.xdist_group("service")
EXAMPLES_PER_ROUTE = 12


# Built from the app object, not fetched: schemathesis's lazy fixture loader does not run
# under this pytest (it reads a node attribute pytest 9 no longer has).
schema = schemathesis.openapi.from_dict(create_app(ServiceConfig()).openapi())


def no_server_fault(ctx, response, case):
    """`not_a_server_error`, but for the one 5xx a client asks for: a 504
    `deadline_exceeded` to a request whose own `x-request-timeout` ran out (a deadline of
    0.0001 s that no search meets is the client's choice, not a fault of the server)."""
    asked = any(name.lower() == "x-request-timeout" for name in (case.headers or {}))
    if (
        asked
        and response.status_code == 504
        and response.json()["error"]["code"] == "deadline_exceeded"
    ):
        return True
    return not_a_server_error(ctx, response, case)


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_ROUTE,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_no_server_errors(case, server) -> None:
    case.call_and_validate(
        base_url=server.url,
        headers=server.headers(),
        timeout=120,
        checks=[
            no_server_fault,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )


def test_the_server_serves_the_same_schema(server) -> None:
    served = httpx.get(server.url + "/openapi.json", timeout=30).json()
    assert served == create_app(ServiceConfig()).openapi()


def test_fuzzing_left_the_server_serving(server) -> None:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=120) as c:
        wait_for_jobs(c)
        assert c.get("/readyz").status_code == 200
        assert c.post("/v1/embeddings", json={"input": "still fine"}).status_code == 200
