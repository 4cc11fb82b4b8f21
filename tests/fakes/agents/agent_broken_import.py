"""A module that raises while it is imported (a missing config at module level)."""

raise RuntimeError("AGENT_CONFIG is not set: cannot build the tool registry")
