"""Cost benchmark: the input tokens a vendor bills for a 1,000-message run and for a continue
from its middle, per vendor, with prompt caching on and off.

    .venv/bin/python contrib/bench/costs.py [--providers anthropic ...] [--messages 1000]

The runs are those of `providers.py` (one tool call a turn, then an answer) against its
vendor server, whose prompt caches keep each vendor's rules and count tokens by a
deterministic approximation, 4 bytes of canonical JSON a token (tests/providers/caching.py).
Billed input is in units of one uncached input token, at the vendors' list-price ratios
(`saved`: against every input token billed in full):
Anthropic bills a cache write at 1.25 (5-minute entries) and a read at 0.1; OpenAI bills a
cached token at 0.1 for the GPT-5 family (gpt-5.4 here) and 0.5 for gpt-4o. OpenAI caches
every prompt whether asked or not: with caching off runpoint only leaves out the
`prompt_cache_key`, which routes a conversation to the machines that hold its prefix (one
server here, so the figures are the same).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from dataclasses import dataclass

from providers import PROVIDERS, echo, vendor_server

from runpoint.core.types import RunStatus, Usage
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.anthropic import Claude
from runpoint.plugins.openai import OpenAIChat, OpenAIResponses
from runpoint.plugins.vendor_model import VendorModel
from runpoint.seams.agent import Agent

MODELS: dict[str, type[VendorModel[object]]] = {
    "openai": OpenAIResponses,  # type: ignore[dict-item]
    "openai-chat": OpenAIChat,  # type: ignore[dict-item]
    "anthropic": Claude,  # type: ignore[dict-item]
}
# the price of a cached token read and written, per uncached input token
READ_PRICE = {"openai": 0.1, "openai-chat": 0.5, "anthropic": 0.1}
WRITE_PRICE = {"openai": 1.0, "openai-chat": 1.0, "anthropic": 1.25}
FIRST_TURNS = 10  # read%>10: after the first turns, whose prompts are under the minimum


@dataclass
class Billed:
    provider: str
    turns: list[Usage]

    @property
    def total(self) -> Usage:
        return sum(self.turns, Usage())

    def read_share(self, skip: int = 0) -> float:
        later = sum(self.turns[skip:], Usage())
        return later.cache_read_tokens / later.input_tokens if later.input_tokens else 0.0

    @property
    def billed(self) -> float:
        t = self.total
        uncached = t.input_tokens - t.cache_read_tokens - t.cache_write_tokens
        return (
            uncached
            + READ_PRICE[self.provider] * t.cache_read_tokens
            + WRITE_PRICE[self.provider] * t.cache_write_tokens
        )


async def bill(provider: str, messages: int, cache: bool, database: str) -> tuple[Billed, Billed]:
    """The run's turns and its continue's, as the vendor counted them."""
    model = MODELS[provider](id=PROVIDERS[provider], prompt_cache=cache)
    agent = Agent(id="bench", model=model, tools=[echo], max_turns=10**6)
    async with Runpoint([agent], database=database) as rp:
        asked = CreateRun(agent_id="bench", message=f"calls: {messages // 2 - 1}")
        run = await (await rp.create_run(asked)).result()
        middle = await (
            await rp.continue_run(
                ContinueRun(run_id=run.run_id, continue_from=messages // 2, input="calls: 0")
            )
        ).result()
        turns = []
        for done in (run, middle):
            assert done.status is RunStatus.COMPLETED, done.error
            detail = await rp.get_run(done.run_id)
            own = detail.messages[done.own_start :]
            turns.append(Billed(provider, [m.usage for m in own if m.usage is not None]))
        return turns[0], turns[1]


def row(what: str, cache: bool, b: Billed) -> str:
    t = b.total
    later = f"{b.read_share(FIRST_TURNS):>7.1%}" if len(b.turns) > FIRST_TURNS else f"{'-':>7}"
    return (
        f"{b.provider:<12} {what:<10} {'on' if cache else 'off':<5} {len(b.turns):>5} "
        f"{t.input_tokens:>12,} {t.cache_read_tokens:>12,} {t.cache_write_tokens:>11,} "
        f"{t.input_tokens - t.cache_read_tokens - t.cache_write_tokens:>11,} "
        f"{b.read_share():>6.1%} {later} {b.billed:>13,.0f} {1 - b.billed / t.input_tokens:>7.1%}"
    )


async def main(providers: list[str], messages: int) -> None:
    print(
        f"{'provider':<12} {'run':<10} {'cache':<5} {'turns':>5} {'input':>12} {'read':>12} "
        f"{'written':>11} {'uncached':>11} {'read%':>6} {'read%>10':>7} {'billed':>13} "
        f"{'saved':>7}"
    )
    with vendor_server(counting=True), tempfile.TemporaryDirectory() as tmp:
        for provider in providers:
            off_run, off_middle = await bill(provider, messages, False, f"sqlite:///{tmp}/o.db")
            on_run, on_middle = await bill(provider, messages, True, f"sqlite:///{tmp}/c.db")
            print(row(f"{messages:,} msgs", False, off_run))
            print(row(f"{messages:,} msgs", True, on_run))
            print(row("continue", False, off_middle))
            print(row("continue", True, on_middle), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--providers", nargs="+", choices=PROVIDERS, default=list(PROVIDERS))
    parser.add_argument("--messages", type=int, default=1_000)
    args = parser.parse_args()
    asyncio.run(main(args.providers, args.messages))
