"""Thin shells that serve the environments to other ecosystems (docs/design.md §5, Integrations).

`forecast_env.adapters.mcp`: the Model Context Protocol server; `forecast_env.adapters.verifiers`: a
`verifiers` environment for RL training. Like the CLI, adapters may import every other package; nothing
imports them but the CLI.
"""
