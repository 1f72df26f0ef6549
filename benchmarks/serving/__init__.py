"""The environments served to other ecosystems (adapters/): the MCP shell, verifiers rollouts, many sessions
per server, and a real local model end to end.
"""
