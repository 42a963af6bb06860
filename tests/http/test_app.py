"""The app is built from the document: what it refuses at start-up, and what every
response carries."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from litestar import Litestar
from litestar.testing import AsyncTestClient

from runpoint.adapters.litestar import build, spec
from runpoint.adapters.litestar.spec import SpecError, document
from runpoint.facade import Runpoint
from runpoint.plugins.demo import agents


def build_with(change: Any) -> None:
    doc = copy.deepcopy(document())
    change(doc)
    build(Runpoint(agents, database="sqlite:///:memory:"), doc)


def test_the_contract_read_back_from_its_cache_is_the_checked_in_yaml(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as a user's interpreter
    contract = yaml.safe_load((Path(__file__).parents[2] / "openapi/openapi.yaml").read_bytes())
    assert spec.document.__wrapped__() == contract  # parsed, and kept as JSON
    kept = Path(spec.__file__).parent / "__pycache__" / "openapi.json"
    assert spec.document.__wrapped__() == contract  # read back
    assert msgspec.json.decode(kept.read_bytes())["document"] == contract


def test_an_operation_without_a_handler_fails_at_start_up() -> None:
    def add(doc: dict[str, Any]) -> None:
        doc["paths"]["/extra"] = {"get": {"operationId": "extra", "responses": {"200": {}}}}

    with pytest.raises(SpecError, match="operations without a handler: extra"):
        build_with(add)


def test_a_handler_without_an_operation_fails_at_start_up() -> None:
    with pytest.raises(SpecError, match="handlers without an operation: health"):
        build_with(lambda doc: doc["paths"].pop("/health"))


def test_a_handler_that_does_not_take_the_operations_inputs_fails_at_start_up() -> None:
    def add_parameter(doc: dict[str, Any]) -> None:
        parameter = {"name": "verbose", "in": "query", "schema": {"type": "boolean"}}
        doc["paths"]["/health"]["get"]["parameters"] = [parameter]

    with pytest.raises(SpecError, match=r"health: the handler takes \[\], .* \['verbose'\]"):
        build_with(add_parameter)


def test_unsupported_schema_fails_at_start_up() -> None:
    def add_format(doc: dict[str, Any]) -> None:
        doc["components"]["schemas"]["Id"]["format"] = "uuid"

    with pytest.raises(SpecError, match=r"agent_id: unsupported schema keywords \['format'\]"):
        build_with(add_format)


async def test_every_response_has_a_request_id(client: AsyncTestClient[Litestar]) -> None:
    given = await client.get("/health", headers={"X-Request-ID": "trace-42"})
    assert given.headers["x-request-id"] == "trace-42"
    made_up = [(await client.get(path)).headers["x-request-id"] for path in ("/health", "/nope")]
    assert len(set(made_up)) == 2 and all(len(i) == 32 for i in made_up)
