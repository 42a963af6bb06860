"""Agents for `runpoint serve --app tests.cli.agents:...` in the CLI's tests."""

from runpoint.seams.agent import Agent

# an agent on a vendor with no API key in the environment: its runs end ERROR
keyless = [Agent(id="keyless", model="openai:gpt-test")]

# an agent on each vendor: serving it needs that vendor's extra
claude = [Agent(id="claude", model="anthropic:claude-test")]
