"""An agent for `runpoint serve --app tests.cli.deprecated_agents:agents`: on a model
Anthropic has deprecated, the first one the installed SDK lists."""

from anthropic._data import DEPRECATED_MODELS

from runpoint.seams.agent import Agent

MODEL = next(iter(DEPRECATED_MODELS))
END_OF_LIFE = DEPRECATED_MODELS[MODEL]

agents = [Agent(id="old", model=f"anthropic:{MODEL}")]
