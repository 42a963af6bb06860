"""A run's transcript: messages, tool calls, what they cost, and a person's decisions on
paused calls."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

import msgspec

from runpoint.core.stamps import new_id, now

Role = Literal["system", "user", "assistant", "tool"]


class Approve(msgspec.Struct, frozen=True, tag="approve"):
    """A person's decision to run a paused tool call with `arguments`, their edit of the
    model's (checked against the tool's schema before it is accepted)."""

    arguments: dict[str, Any]


class Reject(msgspec.Struct, frozen=True, tag="reject"):
    """A person's decision not to run a paused tool call, and why: the model reads `reason`."""

    reason: str


# A person's decision on a paused tool call: run it as the model proposed (True), do not
# (False), its result, given instead of running it (a str), run it with edited arguments
# (Approve), or do not and say why (Reject).
Decision = bool | str | Approve | Reject
# What a person decided about a call, as its result records it
Ruling = Literal["approved", "edited", "rejected", "answered"]


class Usage(msgspec.Struct, omit_defaults=True, gc=False):
    """Tokens a model turn (or a run's turns) took. `input_tokens` counts every prompt
    token; of them, `cache_read_tokens` were read from the vendor's prompt cache and
    `cache_write_tokens` written to it (each billed at its own rate). Zeros are not stored,
    so a row written before the cache fields reads as no cache use."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


# A message, a call and an event (runpoint.core.run.RunEvent) hold data alone: text,
# numbers, JSON values and other such structs, never a reference back to a container that
# holds them, so none can be part of a reference cycle, and the garbage collector does not
# track them (gc=False). A run keeps its transcript and a batch's events live while it goes:
# tracked, a wide batch's thousands of them reached the oldest generation, and each full
# collection they set off walked every object in the process (contrib/bench/storage.py).


class ToolCall(msgspec.Struct, omit_defaults=True, gc=False):
    id: str
    name: str
    arguments: dict[str, Any] = {}


class Message(msgspec.Struct, omit_defaults=True, gc=False):
    """One entry of a run's transcript; `index` is its position in the run. Not tracked
    by the garbage collector (see `ToolCall`)."""

    role: Role
    content: str | None = None
    id: str = msgspec.field(default_factory=new_id)
    created_at: float = msgspec.field(default_factory=now)
    # assistant turns
    tool_calls: list[ToolCall] | None = None
    usage: Usage | None = None
    model: str | None = None
    # tool results
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_args: dict[str, Any] | None = None  # the arguments it ran with
    tool_call_error: bool = False
    ruling: Ruling | None = None  # what a person decided about the call, if one did
    # an edit's: the id of the message of the source run this one stands in for
    replaces: str | None = None


class CallView(msgspec.Struct, gc=False):
    """A tool call as stored, read to be shown (see `MessageView`)."""

    id: str
    name: str
    arguments: msgspec.Raw = msgspec.Raw(b"{}")


class MessageView(msgspec.Struct, omit_defaults=True, gc=False):
    """A `Message` as stored, read to be shown rather than run: what a run would read as
    values (its calls' arguments, a result's `tool_args`) stays the JSON text it is stored
    as, never made into dicts, and no view is tracked by the garbage collector (none holds
    a reference back to another): reading a long transcript makes no garbage to collect.
    A view encodes as its message was stored."""

    role: Role
    content: str | None = None
    id: str = ""
    created_at: float = 0.0
    tool_calls: list[CallView] | None = None
    usage: Usage | None = None
    model: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_args: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    tool_call_error: bool = False
    ruling: Ruling | None = None
    replaces: str | None = None


# a tool call's arguments: decoded (a dict) or, read to be shown, their JSON text
Args = TypeVar("Args")


class ToolExecutionOf(msgspec.Struct, Generic[Args], gc=False):
    """A tool call and, once it ran, its result; derived from the transcript."""

    tool_call_id: str
    tool_name: str
    tool_args: Args  # as it ran (a person may have edited the model's)
    result: str | None = None
    tool_call_error: bool = False
    requires_confirmation: bool = False
    # started, and not known to have finished when its process died: a person decides
    in_doubt: bool = False
    message_index: int = 0
    ruling: Ruling | None = None
    proposed_args: Args | None = None  # the model's, where a person edited them


ToolExecution = ToolExecutionOf[dict[str, Any]]  # as plugins see them: arguments decoded
