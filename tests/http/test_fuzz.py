"""Hostile bodies sent to every operation of openapi.yaml that takes one: deep nesting,
text that is not UTF-8, huge numbers, NULs, wrong or missing content types, empty bodies,
and seeded random nesting, encodings and sizes. Each answer is a 2xx or a documented 4xx,
never a 5xx."""

from __future__ import annotations

import random
import re

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from runpoint.adapters.litestar.spec import document, operations

Client = AsyncTestClient[Litestar]
JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data; boundary=B"
Body = tuple[str | None, bytes]  # (content type, body)


def part(name: str, value: bytes, headers: bytes = b"") -> bytes:
    return b'--B\r\nContent-Disposition: form-data; name="%s"\r\n%s\r\n%s\r\n' % (
        name.encode(),
        headers,
        value,
    )


def deep(depth: int, opening: str = "[", closing: str = "]") -> bytes:
    return (opening * depth + "1" + closing * depth).encode()


HOSTILE: list[Body] = [
    # nesting, at the bound's edge and far past it, as the body and inside a field
    (JSON, deep(1_000)),
    (JSON, deep(1_000, '{"a":', "}")),
    (JSON, b'{"message": "hi", "session_id": "s1", "tools": ' + deep(5_000) + b"}"),
    (
        JSON,
        b'{"session_id": "s1", "tools": [{"tool_call_id": "c", "tool_args": ' + deep(70) + b"}]}",
    ),
    (JSON, b"[" * 100_000),  # never closed
    (JSON, b'{"a": "' + b"[" * 10_000 + b'"}'),  # brackets in a string do not nest
    (FORM, b"session_id=s1&tools=" + deep(1_000).replace(b"[", b"%5B").replace(b"]", b"%5D")),
    (MULTIPART, part("session_id", b"s1") + part("tools", deep(1_000)) + b"--B--\r\n"),
    # text that is not UTF-8
    (JSON, b'{"message": "a\xed\xa0\x80b\xff", "session_id": "s1", "label": "\xc0\xaf"}'),
    (JSON, '{"message": "hi"}'.encode("utf-16")),
    (JSON, b'{"message": "a\\ud800b", "stream": false}'),  # a lone surrogate, escaped
    (JSON, '{"message": "\ufeff\u202e\U0010ffff\u0085", "stream": false}'.encode()),
    (FORM, b"message=a%ED%A0%80b%ff&session_id=s1&input=%C0%AF"),
    (FORM, b"message=a\xed\xa0\x80b\xff&session_id=s\xffs"),
    (
        MULTIPART,
        part("message", b"a\xed\xa0\x80b\xff") + part("session_id", b"\xff") + b"--B--\r\n",
    ),
    (MULTIPART, part("message", b"ab\xff", b"Content-Type: text/plain; charset=nonsense\r\n")),
    (MULTIPART, part("message", b"ab\xff", b"Content-Type: text/plain; charset=utf-16\r\n")),
    # huge and odd numbers
    (JSON, b'{"message": "hi", "count": 1' + b"0" * 10_000 + b"}"),
    (JSON, b'{"message": "hi", "count": 1e999999, "continue_from": -1e999999}'),
    (JSON, b'{"session_id": "s1", "continue_from": 99999999999999999999999999, "count": 2.5}'),
    (JSON, b'{"message": "hi", "stream": 1e308, "count": -0, "continue_from": NaN}'),
    (FORM, b"session_id=s1&continue_from=" + b"9" * 5_000 + b"&stream=" + b"1" * 5_000),
    # NULs, escaped and raw
    (JSON, b'{"message": "a\\u0000b", "session_id": "s1", "label": "\\u0000"}'),
    (JSON, b'{"message": "a\x00b", "session_id": "s1"}'),
    (JSON, b'{"session_id": "s1", "tools": "[{\\"tool_call_id\\": \\"\\\\u0000\\"}]"}'),
    (FORM, b"message=a%00b&session_id=s1&user_id=%00&model=%00"),
    (MULTIPART, part("message", b"a\x00b") + part("session_id", b"s1") + b"--B--\r\n"),
    # JSON that is not an object of the right shape
    (JSON, b"null"),
    (JSON, b'"message"'),
    (JSON, b"[]"),
    (JSON, b'{"message": {"a": 1}, "session_id": ["s1"], "tools": {"a": 1}, "count": "2"}'),
    (JSON, b'{"message": "hi", "message": "again"}'),
    # wrong, odd or missing content types
    ("text/plain", b"message=hi"),
    ("application/xml", b"<message>hi</message>"),
    ("application/json; charset=latin-1", b'{"message": "caf\xe9"}'),
    ("multipart/form-data", part("message", b"hi")),
    (MULTIPART, b"garbage"),
    ("multipart/form-data; boundary=" + "x" * 5_000, b"--x"),
    (None, b'{"message": "hi"}'),
    ("\x7f;;;", b"message=hi"),
    # empty bodies, every way
    (JSON, b""),
    (FORM, b""),
    (MULTIPART, b""),
    (MULTIPART, b"--B--\r\n"),
    (None, b""),
]


LEAVES = ['"[{\\"}]"', "1e5", "-0", "null", '"\\u00e9\\ud800"', "true", '"\\\\"']


def random_json(rng: random.Random, depth: int) -> str:
    """Arrays and objects exactly `depth` deep, in a random mix, each holding random
    leaves (strings with brackets, escapes and quotes) beside the one that goes deeper."""
    text = rng.choice(LEAVES)
    for _ in range(depth):
        items = [rng.choice(LEAVES) for _ in range(rng.randint(0, 2))] + [text]
        rng.shuffle(items)
        if rng.random() < 0.5:
            text = "[" + ",".join(items) + "]"
        else:
            text = "{" + ",".join(f'"{i}":{item}' for i, item in enumerate(items)) + "}"
    return text


def random_bodies(seed: int, count: int) -> list[Body]:
    """Random nesting, encodings and sizes, some cut short."""
    rng = random.Random(seed)
    found: list[Body] = []
    for _ in range(count):
        depth = rng.choice([0, 5, 62, 63, 64, 65, 200, 2_000])
        text = '{"message": "hi", "session_id": "s1", "x": ' + random_json(rng, depth) + "}"
        encoding = rng.choice(["utf-8", "utf-8", "utf-16", "latin-1", "utf-32"])
        body = text.encode(encoding, errors="replace") * rng.choice([1, 1, 20])
        if rng.random() < 0.3:
            body = body[: rng.randrange(len(body) + 1)]
        found.append((rng.choice([JSON, FORM, MULTIPART]), body))
    return found


# every operation that takes a body: both dialects' creates, continue, forks and fan-out, and
# AgentOS's session operations (create, update, rename, delete several), resolving an
# approval, resuming a run's stream, and a schedule's create and update
WITH_BODY = [(op.method, op.path) for op in operations(document()) if op.body_types]


@pytest.mark.parametrize(("method", "template"), WITH_BODY)
async def test_no_hostile_body_is_a_5xx(client: Client, method: str, template: str) -> None:
    assert len(WITH_BODY) == 16
    created = await client.post(
        "/agents/travel-agent/runs", data={"message": "Paris", "stream": "false"}
    )
    # run_id, session_id; a schedule that does not exist (a 404 is no 5xx either)
    ids = {"agent_id": "travel-agent", "team_id": "travel-team", "schedule_id": "no-such-schedule"}
    ids |= created.json()
    if "{approval_id}" in template:  # a paused run's approval, pending while it is fuzzed
        booking = {"message": "Book Paris", "stream": "false"}
        paused = (await client.post("/agents/booking-agent/runs", data=booking)).json()
        inbox = await client.get("/approvals", params={"run_id": paused["run_id"]})
        ids["approval_id"] = inbox.json()["data"][0]["id"]
    path = re.sub(r"\{(\w+)\}", lambda name: str(ids[name[1]]), template)
    for content_type, body in HOSTILE + random_bodies(seed=15, count=40):
        headers = {"content-type": content_type} if content_type else {}
        response = await client.request(method, path, content=body, headers=headers)
        assert response.status_code < 500, (content_type, body[:200], response.text)
        assert response.headers["content-type"] == JSON or response.status_code < 300
