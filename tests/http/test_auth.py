"""Authentication over HTTP: API keys and JWTs (HS256 and RS256) prove a principal; missing,
unknown, expired, forged or misdirected credentials are a 401 that says Bearer; a token
without the scope a method needs is a 403; the open server needs nothing."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from litestar.testing import AsyncTestClient

from runpoint.adapters import auth
from runpoint.adapters.litestar import RunpointApp, create_app
from runpoint.core.tenancy import Principal
from runpoint.plugins.demo import agents

from .conftest import bearer, write_keys

Client = AsyncTestClient[RunpointApp]
SECRET = "a-shared-secret-of-at-least-32-bytes!"
RUNS = "/agents/travel-agent/runs"


def token(key: Any = SECRET, algorithm: str = "HS256", **claims: Any) -> str:
    claims = {"team": "alpha", "sub": "ada", "exp": int(time.time()) + 60, **claims}
    return jwt.encode({k: v for k, v in claims.items() if v is not None}, key, algorithm)


async def client_for(access: auth.Auth) -> AsyncIterator[Client]:
    app = create_app(agents, database="memory:", auth=access)
    async with AsyncTestClient(app) as client:
        yield client


@pytest.fixture
async def keyed(tmp_path: Path) -> AsyncIterator[Client]:
    access = auth.load(api_keys_file=str(write_keys_file(tmp_path)))
    async for client in client_for(access):
        yield client


@pytest.fixture
async def hs256(tmp_path: Path) -> AsyncIterator[Client]:
    access = auth.load(jwt_secret=SECRET, jwt_audience="runpoint", jwt_issuer="https://idp")
    async for client in client_for(access):
        yield client


def write_keys_file(tmp_path: Path) -> Path:
    return write_keys(tmp_path / "keys.yaml")


async def whoami(client: Client, headers: dict[str, str]) -> tuple[int, Any]:
    """Start a run as these credentials; the session it lands in says whose it is."""
    created = await client.post(RUNS, data={"message": "Paris", "stream": "false"}, headers=headers)
    return created.status_code, created.json()


def test_an_api_key_proves_its_principal(tmp_path: Path) -> None:
    access = auth.load(api_keys_file=str(write_keys_file(tmp_path)))
    assert access.principal("alpha-key") == Principal("alpha", "ada", frozenset({"read", "write"}))
    assert access.principal("alpha-reader-key") == Principal("alpha", "rita", frozenset({"read"}))
    with pytest.raises(auth.Unauthenticated, match="unknown API key"):
        access.principal("alpha-key ")


def test_a_keys_file_holds_digests_not_keys(tmp_path: Path) -> None:
    path = tmp_path / "keys.yaml"
    path.write_text("keys:\n  - {sha256: alpha-key, team: alpha}\n")
    with pytest.raises(ValueError, match="not a SHA-256"):
        auth.load(api_keys_file=str(path))
    path.write_text("keys:\n  - {key: alpha-key, team: alpha}\n")
    with pytest.raises(ValueError, match="unknown field"):
        auth.load(api_keys_file=str(path))
    path.write_text(f"keys:\n  - {{sha256: {'a' * 64}, team: {'t' * 201}}}\n")
    with pytest.raises(ValueError, match=r"length <= 200 - at `\$.keys\[0\].team`"):
        auth.load(api_keys_file=str(path))
    path.write_text(f'keys:\n  - {{sha256: {"a" * 64}, team: "t\\0"}}\n')  # YAML's escape
    with pytest.raises(ValueError, match=r"team 't\\x00' has a control character"):
        auth.load(api_keys_file=str(path))


@pytest.mark.parametrize(
    "headers",
    [{}, bearer("nope"), {"Authorization": "Basic YWxwaGEta2V5Og=="}, {"Authorization": "Bearer"}],
    ids=["none", "unknown key", "basic scheme", "empty"],
)
async def test_no_or_bad_credentials_are_a_401_that_says_bearer(
    keyed: Client, headers: dict[str, str]
) -> None:
    for response in [await keyed.get("/sessions", headers=headers), await keyed.post(RUNS)]:
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"] == "Bearer"
        assert response.json()["error_code"] == "UNAUTHENTICATED"


async def test_health_the_document_and_the_console_need_no_credentials(keyed: Client) -> None:
    for path in ("/health", "/openapi.json", "/ui/"):
        assert (await keyed.get(path)).status_code == 200, path


async def test_the_consoles_files_are_public_and_open_nothing_else(keyed: Client) -> None:
    """/ui needs no credentials (a browser attaches no bearer token to a page load), so it
    must serve the console's files and nothing else: no API route, no file beside them."""
    api = ["/ui/sessions", "/ui/%2e%2e/sessions", "/ui/..%2fsessions"]
    beside = ["/ui/%2e%2e/__init__.py", "/ui/%2e%2e%2f%2e%2e/auth.py"]  # both exist
    for path in api + beside:
        assert (await keyed.get(path)).status_code == 404, path
    assert (await keyed.post("/ui/", data={"message": "Paris"})).status_code == 405


@pytest.mark.parametrize(
    "path",
    [
        "/ui/x%00",
        "/ui/index.html%00.js",
        "/ui/%00/index.html",
        "/ui/%ff",
        "/ui/%ed%a0%80",
        "/ui/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        pytest.param("/ui/" + "a" * 5_000, id="a name too long"),
        pytest.param("/ui/" + "a/" * 2_000, id="a path too long"),
    ],
)
async def test_a_console_path_the_system_cannot_look_up_is_a_404(keyed: Client, path: str) -> None:
    """A NUL or a name too long for the file system is not a file of the console either."""
    response = await keyed.get(path)
    assert response.status_code == 404, response.text
    assert response.json()["error_code"] == "NOT_FOUND"


async def test_a_read_only_key_reads_and_cannot_write(keyed: Client) -> None:
    status, run = await whoami(keyed, bearer("alpha-key"))
    assert status == 200
    session = await keyed.get(f"/sessions/{run['session_id']}", headers=bearer("alpha-reader-key"))
    assert session.status_code == 200
    refused = await keyed.post(RUNS, data={"message": "Paris"}, headers=bearer("alpha-reader-key"))
    assert refused.status_code == 403
    assert refused.json() == {
        "detail": "this token lacks the 'write' scope",
        "error_code": "FORBIDDEN",
    }


async def test_a_jwt_proves_its_team_user_and_scopes(hs256: Client) -> None:
    good = token(aud="runpoint", iss="https://idp")
    status, run = await whoami(hs256, bearer(good))
    assert status == 200
    # the same team sees the session; another team's token does not
    seen = await hs256.get(f"/sessions/{run['session_id']}", headers=bearer(good))
    assert seen.status_code == 200
    other = token(aud="runpoint", iss="https://idp", team="beta")
    assert (
        await hs256.get(f"/sessions/{run['session_id']}", headers=bearer(other))
    ).status_code == 404
    reader = token(aud="runpoint", iss="https://idp", scope="read")
    assert (await hs256.get("/sessions", headers=bearer(reader))).status_code == 200
    assert (
        await hs256.post(RUNS, data={"message": "x"}, headers=bearer(reader))
    ).status_code == 403


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"exp": int(time.time()) - 10}, "Signature has expired"),
        ({"exp": None}, 'missing the "exp" claim'),
        ({"aud": "someone-else"}, "Audience doesn't match"),
        ({"aud": None}, 'missing the "aud" claim'),
        ({"iss": "https://elsewhere"}, "Invalid issuer"),
        ({"team": None}, "names no team"),
        ({"key": "another-secret-of-at-least-32-bytes!"}, "Signature verification failed"),
        ({"scope": ["read"]}, "space-separated string"),
    ],
    ids=["expired", "no exp", "wrong audience", "no audience", "wrong issuer", "no team",
         "bad signature", "scope not a string"],
)  # fmt: skip
async def test_a_jwt_that_does_not_verify_is_a_401(
    hs256: Client, claims: dict[str, Any], reason: str
) -> None:
    key = claims.pop("key", SECRET)
    forged = token(key, **{"aud": "runpoint", "iss": "https://idp", **claims})
    response = await hs256.get("/sessions", headers=bearer(forged))
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert reason in response.json()["detail"]


async def test_a_public_key_verifies_rs256_and_refuses_an_hs256_token_made_with_it(
    tmp_path: Path,
) -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (tmp_path / "key.pem").write_bytes(pem)
    access = auth.load(jwt_public_key_file=str(tmp_path / "key.pem"))
    async for client in client_for(access):
        assert (await whoami(client, bearer(token(private, "RS256"))))[0] == 200
        # the classic confusion: the public key used as an HMAC secret
        response = await client.get("/sessions", headers=bearer(hmac_signed(pem)))
        assert response.status_code == 401


def hmac_signed(secret: bytes) -> str:
    """An HS256 JWT signed by hand (PyJWT itself refuses a PEM key as an HMAC secret)."""

    def b64(data: bytes) -> bytes:
        return base64.urlsafe_b64encode(data).rstrip(b"=")

    claims = {"team": "alpha", "exp": int(time.time()) + 60}
    signing_input = b64(b'{"alg":"HS256","typ":"JWT"}') + b"." + b64(json.dumps(claims).encode())
    signature = hmac.new(secret, signing_input, hashlib.sha256).digest()
    return (signing_input + b"." + b64(signature)).decode()


def test_an_audience_without_a_key_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a JWT secret or public key"):
        auth.load(jwt_audience="runpoint")
    with pytest.raises(ValueError, match="not both"):
        auth.load(jwt_secret=SECRET, jwt_public_key_file="key.pem")


async def test_the_open_server_needs_no_credentials_and_ignores_any() -> None:
    async for client in client_for(auth.Auth()):
        for headers in ({}, bearer("anything"), {"Authorization": "Basic eDp5"}):
            assert (await whoami(client, headers))[0] == 200
        sessions = (await client.get("/sessions")).json()["data"]
        assert len(sessions) == 3  # one default team: every session is everyone's


def test_api_keys_and_jwts_together(tmp_path: Path) -> None:
    access = auth.load(api_keys_file=str(write_keys_file(tmp_path)), jwt_secret=SECRET)
    assert access.principal("beta-key").team == "beta"
    assert access.principal(token(team="gamma")).team == "gamma"
    with pytest.raises(auth.Unauthenticated, match="unknown API key"):
        access.principal("gamma-key")
    with pytest.raises(auth.Unauthenticated, match="Signature verification failed"):
        access.principal(token("another-secret-of-at-least-32-bytes!"))
