"""Running runs: the loop of one execution, tool calls, the event log, the executor (local
tasks, queue intake, lease watch), continue, fan-out, edits and the commands."""
