"""runpoint's messages in each vendor's format, and each vendor's answer as a runpoint turn.

runpoint's transcript is the record; a vendor's format is made from it by each execution
(once per message, given the execution's memo), so any run can be continued on any
provider. Tool call ids, arguments, results and
error flags go through unchanged where the vendor has a place for them (OpenAI has no error
flag: the result text says what failed). Anthropic only accepts ids of ``[a-zA-Z0-9_-]``;
others are mapped the same way in a call and in its result, so they still pair up.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import msgspec

from runpoint.core.types import Message, ToolCall, Usage
from runpoint.seams.model import ModelResponse, ToolSchema

if TYPE_CHECKING:  # the SDKs' types only: importing an SDK takes seconds
    from anthropic.types import ContentBlockParam, MessageParam, ToolParam, ToolResultBlockParam
    from openai.types.chat import (
        ChatCompletionAssistantMessageParam,
        ChatCompletionMessageParam,
        ChatCompletionToolParam,
    )
    from openai.types.responses import FunctionToolParam, ResponseInputItemParam

    from runpoint.plugins.vendor_replies import ChatCompletion, ClaudeMessage, Response

T = TypeVar("T")


class MalformedResponse(Exception):
    """A vendor's answer that cannot be read as a model turn."""


def each_once(
    convert: Callable[[Message], list[T]],
    messages: Sequence[Message],
    memo: dict[Any, Any] | None,
) -> list[T]:
    """The items `convert` makes of each message, in order; with a memo
    (`ModelRequest.memo`), a message is converted once for its execution, whose transcript
    only grows: the items made for the last request's messages that start this one are
    kept, and those of the new messages join them. What is returned is shared: do not
    change it (a turn over 1,000 messages copies two lists of pointers, in C)."""
    if memo is None:
        return [item for m in messages for item in convert(m)]
    seen: list[Message]
    converted: list[T]
    seen, converted = memo.get(convert, ([], []))
    if list(messages[: len(seen)]) != seen:  # by identity first: at the speed of C
        seen, converted = [], []
    if len(messages) > len(seen):
        converted = converted + [item for m in messages[len(seen) :] for item in convert(m)]
        memo[convert] = (list(messages), converted)
    return converted


def arguments_json(call: ToolCall) -> str:
    return msgspec.json.encode(call.arguments).decode()


def tool_call(call_id: str, name: str, arguments: object) -> ToolCall:
    """A tool call a vendor returned; `arguments` is JSON text or an already parsed value."""
    if isinstance(arguments, str):
        try:
            arguments = msgspec.json.decode(arguments or "{}")
        except msgspec.DecodeError as exc:
            raise MalformedResponse(f"the arguments of {name} are not JSON: {exc}") from exc
    if not isinstance(arguments, dict):
        raise MalformedResponse(f"the arguments of {name} are not a JSON object: {arguments!r}")
    return ToolCall(call_id, name, arguments)


def system_prompt(
    instructions: str | None, messages: Sequence[Message], memo: dict[Any, Any] | None = None
) -> str | None:
    """The agent's instructions and any system messages, for vendors that take one prompt."""
    parts = [instructions, *each_once(_system_text, messages, memo)]
    return "\n\n".join(p for p in parts if p) or None


def _system_text(m: Message) -> list[str]:
    return [m.content] if m.role == "system" and m.content else []


# -- OpenAI Responses ---------------------------------------------------------------


def responses_tools(tools: Sequence[ToolSchema]) -> list[FunctionToolParam]:
    # strict mode would demand every parameter be required; runpoint validates arguments
    return [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
            "strict": False,
        }
        for t in tools
    ]


def responses_input(
    messages: Sequence[Message], memo: dict[Any, Any] | None = None
) -> list[ResponseInputItemParam]:
    return each_once(_responses_items, messages, memo)


def _responses_items(m: Message) -> list[ResponseInputItemParam]:
    if m.role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": m.tool_call_id or "",
                "output": m.content or "",
            }
        ]
    items: list[ResponseInputItemParam] = []
    if m.content:
        items.append({"role": m.role, "content": m.content})
    for call in m.tool_calls or ():
        items.append(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": arguments_json(call),
            }
        )
    return items


def from_responses(response: Response) -> ModelResponse:
    if response.status == "failed":
        error = response.error.message if response.error else "no reason given"
        raise MalformedResponse(f"the response failed: {error}")
    calls = [
        tool_call(item.call_id, item.name, item.arguments)
        for item in response.output
        if item.type == "function_call"
    ]
    usage = response.usage
    return ModelResponse(
        content=response.output_text or None,
        tool_calls=calls,
        usage=openai_usage(usage.input_tokens, usage.output_tokens, usage.input_tokens_details)
        if usage
        else None,
    )


def openai_usage(prompt: int, output: int, details: object | None) -> Usage:
    """OpenAI's counts, the prompt's cached tokens among them (its details may be missing
    from a server that only speaks the API)."""
    return Usage(prompt, output, cache_read_tokens=getattr(details, "cached_tokens", None) or 0)


# -- OpenAI Chat Completions --------------------------------------------------------


def chat_tools(tools: Sequence[ToolSchema]) -> list[ChatCompletionToolParam]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def chat_messages(
    instructions: str | None, messages: Sequence[Message], memo: dict[Any, Any] | None = None
) -> list[ChatCompletionMessageParam]:
    system = system_prompt(instructions, messages, memo)
    converted = each_once(_chat_message, messages, memo)
    return [{"role": "system", "content": system}, *converted] if system else converted


def _chat_message(m: Message) -> list[ChatCompletionMessageParam]:
    if m.role == "user":
        return [{"role": "user", "content": m.content or ""}]
    if m.role == "tool":
        return [{"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content or ""}]
    if m.role != "assistant":
        return []  # system messages join the system prompt
    # a turn of tool calls alone has no content: left out, not sent as null
    assistant: ChatCompletionAssistantMessageParam = {"role": "assistant"}
    if m.content is not None or not m.tool_calls:
        assistant["content"] = m.content
    if m.tool_calls:
        assistant["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": arguments_json(c)},
            }
            for c in m.tool_calls
        ]
    return [assistant]


def from_chat(completion: ChatCompletion) -> ModelResponse:
    if not completion.choices:
        raise MalformedResponse("the chat completion has no choices")
    message = completion.choices[0].message
    calls = [
        tool_call(c.id, c.function.name, c.function.arguments)
        for c in message.tool_calls or ()
        if c.type == "function" and c.function
    ]
    usage = completion.usage
    return ModelResponse(
        content=message.content or None,
        tool_calls=calls,
        usage=openai_usage(
            usage.prompt_tokens, usage.completion_tokens, usage.prompt_tokens_details
        )
        if usage
        else None,
    )


# -- Anthropic Messages -------------------------------------------------------------


def claude_tools(tools: Sequence[ToolSchema]) -> list[ToolParam]:
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]


def claude_messages(
    messages: Sequence[Message], memo: dict[Any, Any] | None = None
) -> list[MessageParam]:
    """The Messages API's turns: roles alternate, so a batch's results (and whatever
    follows them) make one user turn. With a memo (`each_once`), the turns made for the
    last request of the execution are kept and its new messages join them: regrouping a
    transcript of 1,000 messages took a turn 0.4 ms. What is returned is the caller's;
    the turns in it are shared (the marked ones are copies, `anthropic.mark_breakpoints`)."""
    seen, turns = memo.get(claude_messages, ([], [])) if memo is not None else ([], [])
    if list(messages[: len(seen)]) != seen:  # by identity first: at the speed of C
        seen, turns = [], []
    turns = list(turns)
    for m in messages[len(seen) :]:
        blocks = _claude_blocks(m)
        role: Literal["user", "assistant"] = "assistant" if m.role == "assistant" else "user"
        if turns and turns[-1]["role"] == role:  # a new turn of its own: not the memo's
            turns[-1] = {"role": role, "content": [*turns[-1]["content"], *blocks]}
        elif blocks:
            turns.append({"role": role, "content": blocks})
    if memo is not None:
        memo[claude_messages] = (list(messages), turns)
    return list(turns)


def _claude_blocks(m: Message) -> list[ContentBlockParam]:
    blocks: list[ContentBlockParam] = []
    if m.role == "tool":
        result: ToolResultBlockParam = {
            "type": "tool_result",
            "tool_use_id": claude_id(m.tool_call_id or ""),
            "content": m.content or "",
        }
        if m.tool_call_error:  # false is the vendor's default: sent only when true
            result["is_error"] = True
        blocks.append(result)
    elif m.content and m.role != "system":  # system messages join the system prompt
        blocks.append({"type": "text", "text": m.content})
    for call in m.tool_calls or ():
        blocks.append(
            {
                "type": "tool_use",
                "id": claude_id(call.id),
                "name": call.name,
                "input": call.arguments,
            }
        )
    return blocks


def claude_id(call_id: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_-]", "_", call_id)


def from_claude(message: ClaudeMessage) -> ModelResponse:
    if message.stop_reason is None:
        raise MalformedResponse("the message ended without a stop reason (cut off?)")
    text = "".join(b.text for b in message.content if b.type == "text")
    calls = [tool_call(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"]
    u = message.usage
    read, written = u.cache_read_input_tokens or 0, u.cache_creation_input_tokens or 0
    # cached prompt tokens are input tokens too; the vendor counts them apart
    usage = Usage(u.input_tokens + read + written, u.output_tokens, read, written)
    return ModelResponse(content=text or None, tool_calls=calls, usage=usage)
