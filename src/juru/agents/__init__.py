"""Agents: compiled LangGraph graphs built from features or hosted-agent specs."""
