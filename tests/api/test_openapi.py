"""The OpenAPI contract: documented for operators, and no input the schema allows can cause a 5xx."""

from __future__ import annotations

import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api.conftest import make_settings
from txnwatch.api.app import create_app
from txnwatch.runtime import Runtime, build_runtime


def test_every_read_endpoint_is_documented(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    operations = [(path, op) for path, item in spec["paths"].items() if path.startswith("/api/v1/")
                  and not path.startswith("/api/v1/admin") for op in item.values()]
    assert len(operations) == 11
    for path, op in operations:
        assert op.get("summary") and len(op.get("description", "")) > 40, path
        ok_schema = op["responses"]["200"]["content"]["application/json"]["schema"]
        assert "$ref" in ok_schema or ok_schema.get("type") == "array", path
        assert {"401", "503"} <= set(op["responses"]), path
        if op.get("parameters"):
            assert "422" in op["responses"], path
        for param in op.get("parameters", []):
            assert param.get("description") or param["in"] == "path", (path, param["name"])


# The schema is read once at import; each test case points the app at the seeded runtime of its backend.
APP = create_app(build_runtime(make_settings("sqlite:///:memory:"), collect=False), manage_lifecycle=False)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP).include(path_regex="^/api/v1/(?!admin)")


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_causes_a_server_error(case, runtime: Runtime) -> None:  # type: ignore[no-untyped-def]
    APP.state.runtime = runtime
    response = case.call()
    case.validate_response(response, checks=[not_a_server_error, status_code_conformance, content_type_conformance,
                                             response_schema_conformance])
