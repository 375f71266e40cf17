"""The OpenAPI contract: documented for operators, and no input the schema allows can cause a 5xx."""

from __future__ import annotations

import re

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
from tests.fixtures.lanes import examples
from txnwatch.runtime.lifecycle import Runtime
from txnwatch.runtime.wiring import build_runtime
from txnwatch.serve.app import create_app

# The live-state endpoints of this suite; other routers under /api/v1 (admin, pipeline reports) have
# their own tests and only get the no-5xx property here.
OURS = "^/api/v1/(clusters|transactions|hanging|lso-stalls|partitions|consumer-groups|verification|alerts)(/|$)"


def test_every_read_endpoint_is_documented(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    operations = [(path, op) for path, item in spec["paths"].items() if re.match(OURS, path) for op in item.values()]
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
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)
ours = schema.include(path_regex=OURS)
others = schema.include(path_regex="^/api/v1/").exclude(path_regex=OURS).exclude(path_regex="^/api/v1/admin")


@ours.parametrize()
@settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_causes_a_server_error(case, runtime: Runtime) -> None:
    """Also: every status is documented and every body matches its response model."""
    APP.state.runtime = runtime
    response = case.call()
    case.validate_response(response, checks=[not_a_server_error, status_code_conformance, content_type_conformance,
                                             response_schema_conformance])


@others.parametrize()
@settings(max_examples=examples(15), deadline=None, suppress_health_check=list(HealthCheck))
def test_other_read_routers_never_answer_5xx(case, runtime: Runtime) -> None:
    APP.state.runtime = runtime
    case.validate_response(case.call(), checks=[not_a_server_error])


def test_health_examples_are_real_answers(client: TestClient) -> None:
    """Issue 27 item 7: ReDoc showed a placeholder ({"additionalProp1": "string"}) for /healthz."""
    spec = client.get("/openapi.json").json()
    alive = spec["paths"]["/healthz"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    schema = spec["components"]["schemas"][alive["$ref"].rsplit("/", 1)[1]]
    assert schema["examples"] == [client.get("/healthz").json()] == [{"status": "ok"}]
    ready = spec["paths"]["/readyz"]["get"]["responses"]
    answer = client.get("/readyz").json()
    for code in ("200", "503"):
        assert set(ready[code]["content"]["application/json"]["example"]) == set(answer), code
