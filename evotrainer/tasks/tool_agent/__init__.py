"""The tool-agent task family: multi-step ReAct-style episodes with deterministic tools."""
