"""The served OpenAPI document, and several hundred requests generated from it by schemathesis."""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from shared.api import openapi
from shared.api.routes import ROUTES
from tests.conftest import Service

schema = schemathesis.openapi.from_dict(openapi.document())
EXAMPLES_PER_OPERATION = 40  # 17 operations: several hundred requests in all


def test_the_document_is_served_to_anyone_and_lists_every_operation(service: Service) -> None:
    response = httpx.get(f"{service.base_url}/openapi.json", timeout=5)
    assert response.status_code == 200
    served = response.json()
    operations = {(method.upper(), path) for path, item in served["paths"].items() for method in item}
    assert operations == {(route.method, "/" + route.template) for route in ROUTES}
    assert served["info"]["version"] == "2016-03-01"


@schema.parametrize()
@settings(max_examples=EXAMPLES_PER_OPERATION)
@pytest.mark.timeout(300)
def test_generated_requests_get_documented_answers_and_never_a_500(case: schemathesis.Case, service: Service) -> None:
    case.call_and_validate(
        base_url=service.base_url,
        headers={"x-functions-key": service.key},
        timeout=10,
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )
