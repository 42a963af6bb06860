"""Schemathesis against the in-process app and the checked-in document: every check, the
stateless phases and the stateful phase through the document's links, with a team's
API key; then every operation without credentials, which must be a 401 the document
describes (but for the public ones). And a server run open (no keys) against the document
it serves, which asks for no credentials: every check again, with none sent."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import hypothesis
import pytest
import schemathesis
from litestar import Litestar
from litestar.types import Receive, Scope, Send
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from runpoint.adapters import auth
from runpoint.adapters.litestar import create_app
from runpoint.plugins.demo import agents
from tests.conftest import BACKENDS, fresh_database

from .conftest import SPEC, write_keys

CONFIG = {
    "seed": 20261129,
    "auth": {"openapi": {"bearerAuth": {"bearer": "alpha-key"}}},
    # mostly the demo's agents, so that runs get created and the links have ids to follow
    "dictionaries": {"agents": {"values": [a.id for a in agents]}},
    "parameters": {"path.agent_id": {"dictionary": "agents", "probability": 0.8}},
    "generation": {"mode": "all", "max-examples": 12},
    # the document's own links only, with valid requests, so that chains get somewhere
    "phases": {"stateful": {"inference": {"algorithms": []}, "generation": {"mode": "positive"}}},
    "checks": {
        # A boundary that is out of range for *this* run is valid to the document and a
        # 400 from the server; the document cannot know a run's length.
        "positive_data_acceptance": {"expected-statuses": ["2xx", "400", "404", "409"]},
    },
    # a cron expression, a time zone or an agent the document cannot enumerate is a 422
    # naming the field, as the issue and AgentOS have it
    "operations": [
        {
            "include-operation-id": ["create_schedule", "update_schedule"],
            "checks": {
                "positive_data_acceptance": {
                    "expected-statuses": ["2xx", "400", "404", "409", "422"]
                }
            },
        }
    ],
}


ANONYMOUS = {"seed": 20261129, "generation": {"mode": "all", "max-examples": 3}}
# every check (ignored_auth too), no credentials, two examples: what differs from the keyed
# run is the document, not the data
OPEN = {
    key: value for key, value in CONFIG.items() if key not in ("auth", "phases", "generation")
} | {"generation": {"mode": "all", "max-examples": 2}}
# On PostgreSQL the app's idle queue worker (pgqueuer) jitters its waits with the global
# `random` while Hypothesis generates the next example in this thread: no strategy uses it.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies"
    ":hypothesis.errors.HypothesisDeprecationWarning"
)


class OnDatabase:
    """The app on the database of the test that runs now. Schemathesis makes its tests at
    import, from schemas that name their app, before any database exists (and pytest
    fixtures cannot feed `parametrize`): this is the app they name."""

    app: Litestar

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


@schemathesis.hook
def before_call(ctx: Any, case: Any, **kwargs: Any) -> None:
    """No generated Host header: Host is the transport's, not an operation's parameter
    (OpenAPI leaves it out of what a document describes), and a malformed one is a 400
    from the HTTP server for every request, as RFC 9112 requires."""
    for name in [k for k in case.headers or () if k.lower() == "host"]:
        del case.headers[name]


served, served_open = OnDatabase(), OnDatabase()
api = schemathesis.openapi.from_path(SPEC, config=SchemathesisConfig.from_dict(CONFIG))
anonymous = schemathesis.openapi.from_path(SPEC, config=SchemathesisConfig.from_dict(ANONYMOUS))
api.app = anonymous.app = served
# the document an open server serves (reading it needs no database)
opened = schemathesis.openapi.from_asgi(
    "/openapi.json",
    create_app(agents, database="memory:"),
    config=SchemathesisConfig.from_dict(OPEN),
)
opened.app = served_open


@pytest.fixture(scope="module", params=BACKENDS, autouse=True)
def on_each_database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """The app on each database, one for the module: the examples of one operation leave
    runs and sessions behind for the next to find. The open server has a database of its
    own (its one team would meet the keyed server's teams' sessions: a 403 under /v2/)."""
    directory, open_directory = (tmp_path_factory.mktemp(n) for n in ("keyed", "open"))
    with (
        fresh_database(request, directory) as database,
        fresh_database(request, open_directory) as open_database,
    ):
        keys = auth.load(api_keys_file=str(write_keys(directory / "keys.yaml")))
        served.app = create_app(agents, database=database, auth=keys)
        served_open.app = create_app(agents, database=open_database)
        yield


@opened.hook
@api.hook
def map_body(context: schemathesis.HookContext, body: Any) -> Any:
    """A run created without `stream` answers JSON here, which links can read ids from.
    No run is started in the background: the next step would find it running or done by
    chance, and examples must not depend on timing (tests/faults and test_idempotency.py
    start background runs)."""
    operation = context.operation
    if operation and operation.label == "POST /agents/{agent_id}/runs" and isinstance(body, dict):
        body.setdefault("stream", False)
    if isinstance(body, dict) and "background" in body:
        body["background"] = False
    return body


@opened.hook
@api.hook
def map_headers(context: schemathesis.HookContext, headers: dict[str, str] | None) -> Any:
    """A fresh Idempotency-Key each time: a retry's answer depends on what came before,
    which would make examples depend on each other (test_idempotency.py tests retries)."""
    if headers and "Idempotency-Key" in headers:
        headers["Idempotency-Key"] = uuid.uuid4().hex
    return headers


@api.parametrize()
def test_operations(case: schemathesis.Case[Any]) -> None:
    case.call_and_validate()


def test_stateful() -> None:
    settings = hypothesis.settings(
        max_examples=40,
        stateful_step_count=10,
        derandomize=True,
        deadline=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    api.as_state_machine().run(settings=settings)


@opened.parametrize()
def test_operations_of_an_open_server(case: schemathesis.Case[Any]) -> None:
    case.call_and_validate()


@anonymous.parametrize()
def test_operations_without_credentials(case: schemathesis.Case[Any]) -> None:
    response = case.call()
    where = (case.method, case.path, response.status_code, response.text[:200])
    if case.method.upper() != case.operation.method.upper():
        # the router's own answers, no operation's: OPTIONS (Allow) or 405; no data either way
        assert response.status_code == (204 if case.method.upper() == "OPTIONS" else 405), where
    elif case.operation.definition.raw.get("security") == []:
        assert response.status_code != 401, where
    else:
        assert response.status_code == 401, where
        assert response.headers["www-authenticate"] == ["Bearer"]
    checks = [
        status_code_conformance,
        content_type_conformance,
        response_headers_conformance,
        response_schema_conformance,
    ]
    case.validate_response(response, checks=checks)
