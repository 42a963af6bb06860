"""Edges of the conversion layer that runs through the providers do not reach."""

from __future__ import annotations

import pytest

from runpoint.core.types import Message, ToolCall
from runpoint.plugins import vendor_messages as vm


def test_ids_anthropic_refuses_are_mapped_alike_in_a_call_and_its_result() -> None:
    messages = [
        Message(role="assistant", tool_calls=[ToolCall("call:1/a", "f", {"x": 1})]),
        Message(role="tool", content="oops", tool_call_id="call:1/a", tool_call_error=True),
    ]
    call, result = vm.claude_messages(messages)
    assert call["content"] == [
        {"type": "tool_use", "id": "call_1_a", "name": "f", "input": {"x": 1}}
    ]
    assert result["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1_a", "content": "oops", "is_error": True}
    ]


def test_system_messages_join_the_instructions_where_a_vendor_takes_one_prompt() -> None:
    messages = [Message(role="system", content="Be brief."), Message(role="user", content="Hi")]
    assert vm.system_prompt("Be kind.", messages) == "Be kind.\n\nBe brief."
    assert vm.claude_messages(messages) == [
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]}
    ]
    assert vm.chat_messages("Be kind.", messages) == [
        {"role": "system", "content": "Be kind.\n\nBe brief."},
        {"role": "user", "content": "Hi"},
    ]


def test_a_user_message_after_tool_results_joins_their_turn_for_anthropic() -> None:
    messages = [
        Message(role="assistant", tool_calls=[ToolCall("t1", "f")]),
        Message(role="tool", content="done", tool_call_id="t1"),
        Message(role="user", content="And now?"),
    ]
    turns = vm.claude_messages(messages)
    assert [t["role"] for t in turns] == ["assistant", "user"]
    assert turns[1]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "done"},
        {"type": "text", "text": "And now?"},
    ]


@pytest.mark.parametrize("arguments", ['{"city": ', '["Paris"]', 42])
def test_tool_arguments_that_are_not_a_json_object_are_a_malformed_response(
    arguments: object,
) -> None:
    with pytest.raises(vm.MalformedResponse, match="get_population"):
        vm.tool_call("c1", "get_population", arguments)


def test_empty_tool_arguments_are_no_arguments() -> None:
    assert vm.tool_call("c1", "now", "") == ToolCall("c1", "now", {})
