"""Property-based check of the REST API against docs/openapi.json, over HTTP on the local API.

Schemathesis generates requests from the committed OpenAPI document (valid and invalid: bad types,
missing fields, out-of-range values) and sends them to the local cloud's HTTP API (``make serve``'s
server on a free 127.0.0.1 port). Every answer must be a documented status code, never a 5xx, with a
JSON body that conforms to the documented schema. Bounded: a few examples per operation (< 60 s).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from localcloud.cli import _unsigned_caller
from localcloud.cloud import LocalCloud
from localcloud.http_api import LocalApiServer
from tests.integration.support import ROOT, make_cloud

pytestmark = pytest.mark.integration

schema = schemathesis.openapi.from_path(ROOT / "docs" / "openapi.json")
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
EXAMPLES_PER_OPERATION = 8


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """The local cloud's API served on a free port (like ``make serve``), for the whole module."""
    cloud: LocalCloud = make_cloud()
    with cloud:
        server = LocalApiServer(
            port=0,
            routes=cloud.stack.api_routes,
            serve=cloud.api_request,
            account_id=cloud.account_id,
            now=cloud.now,
            # As `make serve` without --sigv4: unsigned requests come from the demo's requester (ApiCallers),
            # whose execute-api:Invoke the local cloud evaluates per route.
            unsigned_caller=_unsigned_caller(cloud.stack.local_values),
        )
        cloud.clock.ignore_thread(server.start())
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.stop()


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
    derandomize=True,
)
def test_api_conforms_to_its_openapi_document(case: schemathesis.Case[Any], base_url: str) -> None:
    case.call_and_validate(base_url=base_url, checks=CHECKS)
