"""Who a bearer token is: an API key from the keys file, or a JWT signed with the configured
key. With neither configured the server is open: every request acts as `tenancy.OPEN`
(the default team, every scope)."""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import msgspec
import yaml

from runpoint.core.tenancy import READ, WRITE, Principal

ASYMMETRIC = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"]
_ALL_SCOPES = [READ, WRITE]
# a team names a tenant: it is in every session's row and every idempotency key's scope,
# so it is bounded, and holds no control character (PostgreSQL's text holds no U+0000)
MAX_TEAM_LENGTH = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class Unauthenticated(Exception):
    """No credentials, or credentials that prove nothing (401)."""


class ApiKey(msgspec.Struct, forbid_unknown_fields=True):
    """An entry of the keys file: the key's SHA-256 (hex), never the key itself."""

    sha256: str
    team: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TEAM_LENGTH)]
    user: str | None = None
    scopes: list[str] = msgspec.field(default_factory=lambda: list(_ALL_SCOPES))


class KeysFile(msgspec.Struct, forbid_unknown_fields=True):
    keys: list[ApiKey]


@dataclass(frozen=True)
class JwtKey:
    """How tokens are verified: an HS256 secret or a PEM public key, and the `aud` and
    `iss` they must carry when these are given."""

    key: str
    algorithms: list[str]
    audience: str | None = None
    issuer: str | None = None


@dataclass(frozen=True)
class Auth:
    api_keys: tuple[tuple[bytes, Principal], ...] = ()
    jwt: JwtKey | None = None

    @property
    def is_open(self) -> bool:
        return not self.api_keys and self.jwt is None

    def principal(self, token: str | None) -> Principal:
        """The principal `token` proves, or Unauthenticated."""
        if not token:
            raise Unauthenticated("send credentials: Authorization: Bearer <API key or JWT>")
        digest = hashlib.sha256(token.encode()).digest()
        found = None
        for key, principal in self.api_keys:  # every key compared, in constant time each
            if hmac.compare_digest(key, digest):
                found = principal
        if found is not None:
            return found
        if self.jwt is not None and (token.count(".") == 2 or not self.api_keys):
            return self._verify(token, self.jwt)
        raise Unauthenticated("unknown API key")

    def _verify(self, token: str, key: JwtKey) -> Principal:
        import jwt  # here: a server without a JWT key never pays its import (and cryptography's)

        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=key.algorithms,
                audience=key.audience,
                issuer=key.issuer,
                options={"require": ["exp"], "verify_aud": key.audience is not None},
            )
        except jwt.PyJWTError as exc:
            raise Unauthenticated(f"invalid token: {exc}") from None
        team, user, scope = claims.get("team"), claims.get("sub"), claims.get("scope")
        if not isinstance(team, str) or not team:
            raise Unauthenticated("invalid token: it names no team (claim `team`)")
        if len(team) > MAX_TEAM_LENGTH:
            raise Unauthenticated(f"invalid token: its team is over {MAX_TEAM_LENGTH} characters")
        if _CONTROL.search(team):
            raise Unauthenticated("invalid token: its team has a control character")
        if scope is not None and not isinstance(scope, str):
            raise Unauthenticated("invalid token: `scope` must be a space-separated string")
        # a token without `scope` may do anything its team may
        scopes = frozenset(_ALL_SCOPES if scope is None else scope.split())
        return Principal(team, user if isinstance(user, str) else None, scopes)


def load(
    *,
    api_keys_file: str | None = None,
    jwt_secret: str | None = None,
    jwt_public_key_file: str | None = None,
    jwt_audience: str | None = None,
    jwt_issuer: str | None = None,
) -> Auth:
    """The configuration `runpoint serve` was given; raises ValueError if it is unusable."""
    if jwt_secret and jwt_public_key_file:
        raise ValueError("give a JWT secret or a JWT public key, not both")
    key = None
    if jwt_secret:
        key = JwtKey(jwt_secret, ["HS256"], jwt_audience, jwt_issuer)
    elif jwt_public_key_file:
        key = JwtKey(Path(jwt_public_key_file).read_text(), ASYMMETRIC, jwt_audience, jwt_issuer)
    elif jwt_audience or jwt_issuer:
        raise ValueError("a JWT audience or issuer needs a JWT secret or public key")
    keys = _api_keys(Path(api_keys_file)) if api_keys_file else ()
    return Auth(keys, key)


def _api_keys(path: Path) -> tuple[tuple[bytes, Principal], ...]:
    try:
        entries = msgspec.convert(yaml.safe_load(path.read_text()), KeysFile).keys
    except (msgspec.ValidationError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    keys = []
    for entry in entries:
        try:
            digest = bytes.fromhex(entry.sha256)
        except ValueError:
            digest = b""
        if len(digest) != hashlib.sha256().digest_size:
            raise ValueError(f"{path}: {entry.sha256!r} is not a SHA-256 in hex")
        if _CONTROL.search(entry.team):
            raise ValueError(f"{path}: team {entry.team!r} has a control character")
        keys.append((digest, Principal(entry.team, entry.user, frozenset(entry.scopes))))
    return tuple(keys)
