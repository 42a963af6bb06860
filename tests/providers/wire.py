"""Model turns written in each vendor's real wire format, whole or as Server-Sent Events.

The shapes follow the vendors' API references (and the SDKs' types): Responses
(`response.*` events), Chat Completions (`chat.completion.chunk` data lines ending in
`[DONE]`) and Anthropic Messages (`message_start` ... `message_stop`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.providers.caching import ClaudeCache, Counted, OpenAICache, TooManyBreakpoints, tokens
from tests.providers.loopback import Reply, Request


@dataclass
class Turn:
    text: str | None = None
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # id, name, args
    # input, output tokens; None: as the vendor counts them (tests.providers.caching)
    usage: tuple[int, int] | None = None

    def output_tokens(self) -> int:
        if self.usage is not None:
            return self.usage[1]
        return tokens((self.text or "").encode() + json.dumps(self.calls).encode())


def counted(turn: Turn, count: Callable[[], Counted]) -> Counted:
    """The turn's scripted input tokens (nothing cached), else the server's count."""
    return count() if turn.usage is None else Counted(turn.usage[0])


def _halves(text: str) -> list[str]:
    # arguments arrive in pieces; two are enough to show they are joined
    middle = len(text) // 2
    return [text[:middle], text[middle:]]


def _words(text: str) -> list[str]:
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + words[-1:]


# -- OpenAI (one server answers both APIs, by path) --------------------------------


def openai(turn: Turn, request: Request, cache: OpenAICache | None = None) -> Reply:
    """The reply to `request`, its prompt cached in `cache` (a server's own)."""
    stream = bool(request.body.get("stream"))
    cache = cache or OpenAICache()
    usage = counted(turn, lambda: cache.count(request.path, request.body))
    if request.path.endswith("/chat/completions"):
        if stream:
            return Reply(events=_chat_chunks(turn, usage))
        return Reply(body=_chat_completion(turn, usage))
    if stream:
        return Reply(events=_response_events(turn, usage))
    return Reply(body=_response(turn, usage))


def _response(turn: Turn, usage: Counted, status: str = "completed") -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if turn.text is not None:
        output.append(_message_item(turn.text))
    output += [_call_item(*call) for call in turn.calls]
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": status,
        "model": "gpt-5.4",
        "output": output if status == "completed" else [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": None,
        "incomplete_details": None,
        "usage": {
            "input_tokens": usage.prompt,
            "output_tokens": turn.output_tokens(),
            "total_tokens": usage.prompt + turn.output_tokens(),
            "input_tokens_details": {"cached_tokens": usage.read},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        if status == "completed"
        else None,
    }


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": []}


def _message_item(text: str, status: str = "completed") -> dict[str, Any]:
    content = [_text_part(text)] if text else []
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": status,
        "content": content,
    }


def _call_item(call_id: str, name: str, args: dict[str, Any], done: bool = True) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(args) if done else "",
        "status": "completed" if done else "in_progress",
    }


def _response_events(turn: Turn, usage: Counted) -> list[tuple[str | None, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response(turn, usage, "in_progress")},
    ]
    index = 0
    if turn.text is not None:
        part = {"item_id": "msg_1", "output_index": index, "content_index": 0}
        events += [
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": _message_item("", "in_progress"),
            },
            part | {"type": "response.content_part.added", "part": _text_part("")},
        ]
        events += [
            part | {"type": "response.output_text.delta", "delta": piece, "logprobs": []}
            for piece in _words(turn.text)
        ]
        events += [
            part | {"type": "response.output_text.done", "text": turn.text, "logprobs": []},
            part | {"type": "response.content_part.done", "part": _text_part(turn.text)},
            {
                "type": "response.output_item.done",
                "output_index": index,
                "item": _message_item(turn.text),
            },
        ]
        index += 1
    for call in turn.calls:
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": _call_item(*call, done=False),
            }
        )
        events += [
            {
                "type": "response.function_call_arguments.delta",
                "item_id": f"fc_{call[0]}",
                "output_index": index,
                "delta": piece,
            }
            for piece in _halves(json.dumps(call[2]))
        ]
        events += [
            {
                "type": "response.function_call_arguments.done",
                "item_id": f"fc_{call[0]}",
                "output_index": index,
                "arguments": json.dumps(call[2]),
            },
            {"type": "response.output_item.done", "output_index": index, "item": _call_item(*call)},
        ]
        index += 1
    events.append({"type": "response.completed", "response": _response(turn, usage)})
    return [(e["type"], e | {"sequence_number": n}) for n, e in enumerate(events)]


def _chat_completion(turn: Turn, usage: Counted) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text, "refusal": None}
    if turn.calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in turn.calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if turn.calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": _chat_usage(turn, usage),
    }


def _chat_usage(turn: Turn, usage: Counted) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt,
        "completion_tokens": turn.output_tokens(),
        "total_tokens": usage.prompt + turn.output_tokens(),
        "prompt_tokens_details": {"cached_tokens": usage.read},
    }


def _chat_chunks(turn: Turn, usage: Counted) -> list[tuple[str | None, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "gpt-4o",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in _words(turn.text or "") if piece]
    for index, (call_id, name, args) in enumerate(turn.calls):
        first = {"index": index, "id": call_id, "type": "function"}
        chunks.append(
            chunk({"tool_calls": [first | {"function": {"name": name, "arguments": ""}}]})
        )
        chunks += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _halves(json.dumps(args))
        ]
    chunks.append(chunk({}, "tool_calls" if turn.calls else "stop"))
    last = chunk({}) | {"choices": [], "usage": _chat_usage(turn, usage)}
    return [(None, c) for c in [*chunks, last]] + [(None, "[DONE]")]


# -- Anthropic Messages -------------------------------------------------------------


def anthropic(turn: Turn, request: Request, cache: ClaudeCache | None = None) -> Reply:
    """The reply to `request`, its prompt cached in `cache` (a server's own)."""
    try:
        usage = counted(turn, lambda: (cache or ClaudeCache()).count(request.body))
    except TooManyBreakpoints as exc:
        return Reply(
            400, {"type": "error", "error": {"type": "invalid_request_error", "message": str(exc)}}
        )
    if request.body.get("stream"):
        return Reply(events=_claude_events(turn, usage))
    return Reply(body=_claude_message(turn, usage))


def _claude_blocks(turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
    return blocks + [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in turn.calls]


def _claude_message(turn: Turn, usage: Counted, done: bool = True) -> dict[str, Any]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": _claude_blocks(turn) if done else [],
        "stop_reason": ("tool_use" if turn.calls else "end_turn") if done else None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.prompt - usage.read - usage.written,
            "cache_read_input_tokens": usage.read,
            "cache_creation_input_tokens": usage.written,
            "output_tokens": turn.output_tokens() if done else 1,
        },
    }


def _claude_events(turn: Turn, usage: Counted) -> list[tuple[str | None, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": _claude_message(turn, usage, False)}
    ]
    for index, block in enumerate(_claude_blocks(turn)):
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _words(block["text"])]
        else:
            start = block | {"input": {}}
            pieces = _halves(json.dumps(block["input"]))
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events += [
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": "tool_use" if turn.calls else "end_turn",
                "stop_sequence": None,
            },
            "usage": {"output_tokens": turn.output_tokens()},
        },
        {"type": "message_stop"},
    ]
    return [(e["type"], e) for e in events]


# -- failures -----------------------------------------------------------------------


def error(provider: str, status: int, message: str) -> Reply:
    """A vendor's error reply; it asks for a 1 ms retry delay so tests stay fast."""
    headers = {"retry-after-ms": "1"}
    if provider == "anthropic":
        kind = "rate_limit_error" if status == 429 else "api_error"
        return Reply(
            status, {"type": "error", "error": {"type": kind, "message": message}}, headers=headers
        )
    kind = "requests" if status == 429 else "server_error"
    return Reply(
        status,
        {"error": {"message": message, "type": kind, "param": None, "code": None}},
        headers=headers,
    )


def cut_off(reply: Reply) -> Reply:
    """The stream of `reply` broken off halfway, before the vendor says the turn ended."""
    assert reply.events is not None
    return Reply(events=reply.events[: len(reply.events) // 2])
