"""The seams plugins fill, each a small Protocol (storage, model, checkpoint policy, run
queue, session state), the agent definition, the hook specs and the plugin host."""
