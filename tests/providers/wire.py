"""Model turns written in each vendor's real wire format, whole or as Server-Sent Events.

The shapes follow the vendors' API references (and the SDKs' types): Responses
(`response.*` events), Chat Completions (`chat.completion.chunk` data lines ending in
`[DONE]`) and Anthropic Messages (`message_start` ... `message_stop`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.providers.loopback import Reply, Request


@dataclass
class Turn:
    text: str | None = None
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # id, name, args
    usage: tuple[int, int] = (10, 5)  # input, output tokens


def _halves(text: str) -> list[str]:
    # arguments arrive in pieces; two are enough to show they are joined
    middle = len(text) // 2
    return [text[:middle], text[middle:]]


def _words(text: str) -> list[str]:
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + words[-1:]


# -- OpenAI (one server answers both APIs, by path) --------------------------------


def openai(turn: Turn, request: Request) -> Reply:
    stream = bool(request.body.get("stream"))
    if request.path.endswith("/chat/completions"):
        return Reply(events=_chat_chunks(turn)) if stream else Reply(body=_chat_completion(turn))
    return Reply(events=_response_events(turn)) if stream else Reply(body=_response(turn))


def _response(turn: Turn, status: str = "completed") -> dict[str, Any]:
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
            "input_tokens": turn.usage[0],
            "output_tokens": turn.usage[1],
            "total_tokens": sum(turn.usage),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        if status == "completed"
        else None,
    }


def _message_item(text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if text else []
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


def _response_events(turn: Turn) -> list[tuple[str | None, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response(turn, "in_progress")},
    ]
    index = 0
    if turn.text is not None:
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": _message_item("", "in_progress"),
            }
        )
        events += [
            {
                "type": "response.output_text.delta",
                "item_id": "msg_1",
                "output_index": index,
                "content_index": 0,
                "delta": piece,
                "logprobs": [],
            }
            for piece in _words(turn.text)
        ]
        events.append(
            {
                "type": "response.output_item.done",
                "output_index": index,
                "item": _message_item(turn.text),
            }
        )
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
        events.append(
            {"type": "response.output_item.done", "output_index": index, "item": _call_item(*call)}
        )
        index += 1
    events.append({"type": "response.completed", "response": _response(turn)})
    return [(e["type"], e | {"sequence_number": n}) for n, e in enumerate(events)]


def _chat_completion(turn: Turn) -> dict[str, Any]:
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
        "usage": _chat_usage(turn),
    }


def _chat_usage(turn: Turn) -> dict[str, int]:
    return {
        "prompt_tokens": turn.usage[0],
        "completion_tokens": turn.usage[1],
        "total_tokens": sum(turn.usage),
    }


def _chat_chunks(turn: Turn) -> list[tuple[str | None, Any]]:
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
    usage = chunk({}) | {"choices": [], "usage": _chat_usage(turn)}
    return [(None, c) for c in [*chunks, usage]] + [(None, "[DONE]")]


# -- Anthropic Messages -------------------------------------------------------------


def anthropic(turn: Turn, request: Request) -> Reply:
    if request.body.get("stream"):
        return Reply(events=_claude_events(turn))
    return Reply(body=_claude_message(turn))


def _claude_blocks(turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
    return blocks + [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in turn.calls]


def _claude_message(turn: Turn, done: bool = True) -> dict[str, Any]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": _claude_blocks(turn) if done else [],
        "stop_reason": ("tool_use" if turn.calls else "end_turn") if done else None,
        "stop_sequence": None,
        "usage": {"input_tokens": turn.usage[0], "output_tokens": turn.usage[1] if done else 1},
    }


def _claude_events(turn: Turn) -> list[tuple[str | None, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": _claude_message(turn, False)}
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
            "usage": {"output_tokens": turn.usage[1]},
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
