"""Every JSON body the API builds is exactly what its response model would serialise.

Routes serialise the data they build without validating it through the model (params.json_response, for
CPU). A field left out, a wrong type or a value the model would coerce shows up here as a difference
between the body and the model's own dump of it, on both backends and every read endpoint with data.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from tests.api.factory import PROD, Scenario
from txnwatch.serve.api import schemas

SKIP = re.compile(r"^/api/v1/(admin|reports)/")  # admin writes; reports have their own tests


def _read_paths(client: TestClient, scenario: Scenario) -> dict[str, Any]:
    """Each documented GET under /api/v1 whose 200 body is a model, path parameters from the scenario."""
    spec = client.get("/openapi.json").json()
    fill = {"cluster": PROD, "name": PROD, "transactional_id": scenario.transactions[PROD][0]}
    found: dict[str, Any] = {}
    for path, item in spec["paths"].items():
        op = item.get("get")
        if op is None or not path.startswith("/api/v1/") or SKIP.match(path):
            continue
        schema = op["responses"]["200"]["content"]["application/json"]["schema"]
        if "$ref" in schema:
            model: Any = getattr(schemas, schema["$ref"].rsplit("/", 1)[1])
        elif schema.get("type") == "array" and "$ref" in schema["items"]:
            model = list[getattr(schemas, schema["items"]["$ref"].rsplit("/", 1)[1])]  # type: ignore[misc]
        else:
            continue
        params = re.findall(r"{(\w+)(?::path)?}", path)
        if all(p in fill for p in params):
            found[re.sub(r"{(\w+)(?::path)?}", lambda g: fill[g.group(1)], path)] = model
    return found


def test_every_body_equals_its_models_dump(client: TestClient, scenario: Scenario) -> None:
    checked = []
    for path, model in _read_paths(client, scenario).items():
        response = client.get(path)
        assert response.status_code == 200, (path, response.text[:300])
        body = response.json()
        adapter: TypeAdapter[Any] = TypeAdapter(model)
        assert adapter.dump_python(adapter.validate_python(body), mode="json") == body, path
        checked.append(path)
    assert len(checked) >= 10, checked
