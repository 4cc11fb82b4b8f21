"""rltui: a live terminal monitor and triage tool for distributed RL training nodes."""

__version__ = "0.1.0"
