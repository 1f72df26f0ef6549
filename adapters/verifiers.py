"""The forecasting environment as a `verifiers` environment for RL training (docs/design.md §5, Integrations).

`load_environment(workspace, split="eval", episode=False, ...)` returns a verifiers 0.4 environment (its
"v1" stack: `Env`, `Taskset`, `Task`, `Toolset`, a harness) whose rollouts are played by verifiers' own
machinery: its interception server relays the model's requests to an OpenAI-compatible endpoint, its
bundled chat program runs the tool-calling loop, and the tools are an MCP tool server it launches once
for the taskset.

- **Unit.** A rollout is one (event, forecast date), the training export's unit: the prompt is that date's
  observation and the rollout ends when the date's forecast is recorded. `episode=True` plays a whole event
  in one rollout, the notebook carried from date to date, each forecast answered with the next date's
  observation.
- **Tools.** The environment's own tools (`search`, `open_article`, `notebook_add`, `notebook_supersede`,
  `forecast`, plus a free `observe`) with the environment's JSON schemas. The date is held by the
  environment and injected into every tool; no tool takes a date, so no argument can move it. Arguments are
  handed to the environment unvalidated, so a wrong type is the environment's invalid action (an error
  observation that counts against the budget), as for every other agent.
- **Reward.** The environment's Brier-based reward: minus the date's multiclass Brier (per-date rollouts), or
  minus the mean Brier over the event's scored dates (`episode=True`, the environment's episode reward). No
  score, reward or label appears in any tool result; the reward reaches verifiers when the rollout is
  scored, after its tools are gone. A rollout that ends without a forecast is closed with the empty report
  `{}` (the environment's uniform fallback, as the `llm` agent does); one that failed (endpoint down) leaves
  its dates unforecast: recorded as *missing*, never scored.
- **Recording.** Every rollout is stored as a part of `WS/runs/<run_id>/` like a runner episode (agent label
  `label`, one rollout number per rollout), and the run is consolidated when the environment stops serving,
  so `forecast-env report` and `forecast-env score --release` take it. run.json says `engine: verifiers`,
  `unit: date | event` and `session: per_date` (a per-date rollout sees one date's observation alone) or
  `session: episode` (a whole-event rollout keeps its own chat, docs/design.md §5).

Where things run: the environment itself (a pool of `ForecastEnv`s sharing one searcher) lives in the process
that runs the verifiers `Env` (the eval runner, a prime-rl env worker); a small HTTP service on 127.0.0.1
there (`rollout_service.py`) plays each rollout's tool calls. The tool server (one per serving `Env`, taskset-scoped: a server per
rollout cost 2.4x the wall time, benchmarks/log/2026-11-30-verifiers-rollouts.md) is a thin MCP shell that forwards each call to it: the
rollout's session id and the service's address reach the tool server through verifiers' rollout state (each
call carries its rollout's state coordinates, signed by verifiers), which the model never sees. The default harness (`ForecastHarness`) runs verifiers' bundled
chat program (the `null` harness's) with this Python instead of a `uv`-built environment, so nothing is
downloaded; any verifiers harness id may be given instead (`harness="null"` needs `uv`).

verifiers resolves a taskset id by importing a top-level module: this one is `forecast_env_verifiers`
(`--env.taskset.id forecast-env-verifiers` on verifiers' own CLI).
"""

import asyncio
import json
import secrets
import sys
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import verifiers.v1 as vf
from pydantic import Field, WithJsonSchema
from verifiers.v1.configs.agent import AgentConfig
from verifiers.v1.configs.env import EnvConfig
from verifiers.v1.harnesses.null import NullHarness
from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE
from verifiers.v1.runtimes import SubprocessConfig

from forecast_env.adapters.rollout_service import (
    RolloutRun,
    close_services,
    ensure_run_record,
    service_for,
    task_rows,
)
from forecast_env.config import load_config
from forecast_env.errors import ForecastEnvError

#: The taskset (and harness) id verifiers imports: the top-level module `forecast_env_verifiers`.
PLUGIN_ID = "forecast-env-verifiers"
#: Seconds a tool server waits for the environment to answer one call (a search on a loaded machine).
CALL_TIMEOUT_S = 300.0


# ---------------------------------------------------------------------------------------------
# the environment's tool schemas, as the tool server advertises them
# ---------------------------------------------------------------------------------------------


def _env_tool_specs() -> dict[str, dict[str, Any]]:
    """The environment's tool specs (default configuration) by name: `{description, parameters}`."""
    from forecast_env.envs.tools import tool_specs

    cfg = load_config("env")
    return {s["function"]["name"]: s["function"]
            for s in tool_specs(cfg["max_k"], cfg["search_k"], cfg["search_mode"])}


_SPECS = _env_tool_specs()


def _schema(tool: str, name: str) -> WithJsonSchema:
    """The environment's JSON schema of one tool argument, as the tool server advertises it."""
    return WithJsonSchema(_SPECS[tool]["parameters"]["properties"][name])


# The tools' arguments: passed through untouched, advertised with the environment's schemas.
SearchQuery = Annotated[Any, _schema("search", "query")]
SearchK = Annotated[Any, _schema("search", "k")]
SearchMode = Annotated[Any, _schema("search", "mode")]
DocId = Annotated[Any, _schema("open_article", "doc_id")]
Claim = Annotated[Any, _schema("notebook_add", "claim")]
DateObserved = Annotated[Any, _schema("notebook_add", "date_observed")]
DocIds = Annotated[Any, _schema("notebook_add", "doc_ids")]
EntryId = Annotated[Any, _schema("notebook_supersede", "entry_id")]
Reason = Annotated[Any, _schema("notebook_supersede", "reason")]
Probabilities = Annotated[Any, _schema("forecast", "probabilities")]


# ---------------------------------------------------------------------------------------------
# verifiers types: task data, rollout state, tool server, task, taskset, harness, env
# ---------------------------------------------------------------------------------------------


class ForecastTaskData(vf.TaskData):
    """One rollout's unit: an event and (per-date rollouts) one of its scheduled steps. No label."""

    event_id: str
    step: int | None = None
    """The scheduled step of a per-date rollout; None for a whole-event rollout."""
    forecast_date: str | None = None


class ForecastState(vf.State):
    """What the host and the rollout's tool server share (never shown to the model)."""

    session: str = ""
    """The rollout's session at the host's environment service (an unguessable id)."""
    service: str = ""
    """The environment service's address (http://127.0.0.1:PORT)."""
    finished: bool = False
    """The rollout's unit is over (its forecast recorded): the rollout stops at the next model turn."""
    reward: float | None = None
    scores: list[dict[str, Any]] = Field(default_factory=list)
    """Per scored date: step, forecast_date, brier, accuracy, log_vs_market, fallback (set when scored)."""


class ForecastToolset(vf.Toolset[vf.SharedToolsetConfig, ForecastState]):
    """The environment's tools, served to the harnesses over MCP; each call is played by the host's environment.

    One server for the whole taskset (verifiers starts it once per serving `Env`): it holds no rollout's
    state, and each call carries its rollout's state coordinates, signed by verifiers, in the URL."""

    TOOL_PREFIX = None  # advertise the tools bare: search, open_article, ..., as the environment names them

    async def _call(self, tool: str, arguments: dict[str, Any]) -> str:
        import httpx

        state = self.state
        if not state.session or not state.service:
            return json.dumps({"error": "this tool server has no rollout session (the task's setup did not run)"})
        try:
            async with httpx.AsyncClient(timeout=CALL_TIMEOUT_S) as client:
                resp = await client.post(f"{state.service}/call", json={
                    "session": state.session, "tool": tool, "arguments": arguments})
            resp.raise_for_status()
            reply = resp.json()
        except (httpx.HTTPError, ValueError) as exc:
            return json.dumps({"error": f"{tool}: the environment did not answer ({type(exc).__name__}: {exc})"})
        if reply.get("finished"):
            self.state.finished = True
        return str(reply.get("text", ""))

    @staticmethod
    def _given(**arguments: Any) -> dict[str, Any]:
        return {k: v for k, v in arguments.items() if v is not None}

    @vf.tool
    async def observe(self) -> str:
        """The current observation (question, options, forecast date, step, notebook, budget) as JSON. Free:
        it does not count against the call budget."""
        return await self._call("observe", {})

    @vf.tool
    async def search(self, query: SearchQuery, k: SearchK = None,
                     mode: SearchMode = None) -> str:
        """Search the news corpus. Only articles published on or before the current forecast date are
        searched. Returns ranked hits (doc_id, day, title, url, summary)."""
        return await self._call("search", self._given(query=query, k=k, mode=mode))

    @vf.tool
    async def open_article(self, doc_id: DocId) -> str:
        """Read one article (a doc_id from search hits) published on or before the forecast date."""
        return await self._call("open_article", {"doc_id": doc_id})

    @vf.tool
    async def notebook_add(self, claim: Claim,
                           date_observed: DateObserved,
                           doc_ids: DocIds) -> str:
        """Record one piece of evidence in the notebook: a short factual claim, the ISO date of the article it
        comes from, and the articles' doc_ids."""
        return await self._call("notebook_add", {"claim": claim, "date_observed": date_observed, "doc_ids": doc_ids})

    @vf.tool
    async def notebook_supersede(self, entry_id: EntryId,
                                 reason: Reason) -> str:
        """Mark an earlier notebook entry as outdated, with the reason."""
        return await self._call("notebook_supersede", {"entry_id": entry_id, "reason": reason})

    @vf.tool
    async def forecast(self, probabilities: Probabilities) -> str:
        """Report the forecast for the current date: a probability for every offered option (a mapping from
        option label to probability, or a list aligned with the options). It ends the date."""
        return await self._call("forecast", {"probabilities": probabilities})


class ForecastTaskConfig(vf.TaskConfig):
    """What every rollout needs to reach the environment and its run (set by `load_environment`)."""

    workspace: str = ""
    split: str = "eval"
    episode: bool = False
    run_id: str = ""
    label: str = "verifiers"
    events: list[str] | None = None
    """Narrows the split to these events (None: all of them)."""
    env: dict[str, Any] = Field(default_factory=dict)
    """Overrides of the `env` config section (configs/env.yaml)."""


class ForecastTask(vf.Task[ForecastTaskData, ForecastState, ForecastTaskConfig]):
    """One rollout: opens a session at the host's environment service, closes and scores it at the end."""

    @property
    def key(self) -> str:
        return self.data.id or self.hash

    async def setup(self, trace: vf.Trace, runtime: Any) -> None:
        service = service_for(rollout_run(self.config))
        trace.state.session = await asyncio.to_thread(service.open, self.data.event_id, self.data.step, trace.id)
        trace.state.service = service.url

    async def finalize(self, trace: vf.Trace, runtime: Any) -> None:
        from verifiers.v1.dialects.chat import message_to_wire

        service = service_for(rollout_run(self.config))
        messages = [message_to_wire(m) for m in trace.messages]
        model = trace.agent.config.model if trace.agent is not None else None
        result = await asyncio.to_thread(service.finish, trace.state.session, messages, model)
        trace.state.finished = True
        trace.state.reward = result["reward"]
        trace.state.scores = result["scores"]

    @vf.stop
    async def forecast_recorded(self, trace: vf.Trace) -> bool:
        """Stop at the model's next turn once the unit's forecast is recorded."""
        return bool(trace.state.finished)

    @vf.reward
    async def forecast_reward(self, trace: vf.Trace) -> float:
        """The environment's reward: -Brier of the date, or -mean Brier of the event's scored dates."""
        return float(trace.state.reward or 0.0)

    @vf.metric
    async def forecast_quality(self, trace: vf.Trace) -> dict[str, float]:
        """Mean Brier and accuracy of the rollout's scored dates, and how many were fallbacks (not rewards)."""
        scored = [s for s in trace.state.scores if s.get("brier") is not None]
        if not scored:
            return {}
        return {"brier": sum(s["brier"] for s in scored) / len(scored),
                "accuracy": sum(s["accuracy"] for s in scored) / len(scored),
                "fallbacks": float(sum(1 for s in scored if s.get("fallback")))}


class ForecastTasksetConfig(vf.TasksetConfig):
    """The taskset: the split's events (or `task.events`), one task per (event, forecast date) or per event."""

    task: ForecastTaskConfig = ForecastTaskConfig()
    tools: vf.SharedToolsetConfig = vf.SharedToolsetConfig()


class ForecastTaskset(vf.Taskset[ForecastTask, ForecastTasksetConfig]):
    """The split's forecast dates (or events) as verifiers tasks; prompts are the environment's observations."""

    @classmethod
    def toolsets(cls, config: ForecastTasksetConfig) -> list[vf.Toolset]:
        return [ForecastToolset(config.tools)]

    def load(self) -> Iterator[ForecastTask]:
        cfg = self.config.task
        for data in task_rows(rollout_run(cfg)):
            yield ForecastTask(ForecastTaskData(**data), cfg)


class ForecastHarness(NullHarness):
    """verifiers' bundled chat program (the `null` harness's tool-calling loop) run with this Python.

    The `null` harness builds the program's environment with `uv` (downloading its packages); this Python
    already has every package the program imports (verifiers depends on them), so nothing is installed.
    Runs on the `subprocess` runtime only; in a container use `null`.
    """

    async def setup(self, runtime: Any) -> None:
        if runtime.type != "subprocess":
            raise vf.HarnessError(f"{PLUGIN_ID} harness: runs the chat program with this Python, so it needs the "
                                  f"subprocess runtime (got {runtime.type!r}); use harness 'null' in a container")

    async def launch(self, ctx: Any, trace: vf.Trace, runtime: Any, endpoint: str, secret: str,
                     mcp_urls: dict[str, str], data: vf.TaskData, tool_interception_url: str | None = None) -> Any:
        system_prompt, prompt = self.resolve_prompt(data)
        path = "vf-chat-program.py"
        await runtime.write(path, CHAT_PROGRAM_SOURCE.encode())
        args = [sys.executable, path, f"--base-url={endpoint}", f"--api-key={secret}", f"--model={ctx.model}"]
        if tool_interception_url:
            args.append(f"--tool-interception-url={tool_interception_url}")
        if system_prompt:
            args.append(f"--system-prompt={system_prompt}")
        if mcp_urls:
            servers = {name: {"url": url, "timeout": self.config.tool_timeout} for name, url in mcp_urls.items()}
            args.append("--mcp-config=" + json.dumps({"mcpServers": servers}))
        if isinstance(prompt, str):
            args.append(f"--prompt={prompt}")
        elif prompt is not None:
            from verifiers.v1.dialects.chat import message_to_wire

            messages_path = f".vf-initial-messages-{trace.id}.json"
            await runtime.write(messages_path, json.dumps([message_to_wire(m) for m in prompt]).encode())
            args.append(f"--initial-messages-file={messages_path}")
        return await runtime.run_program(args, dict(self.config.resolved_env))


class ForecastEnvConfig(EnvConfig):
    """One `agent` seat, on the local subprocess runtime by default (verifiers' default is a remote sandbox)."""

    agent: AgentConfig = AgentConfig(runtime=SubprocessConfig())


class ForecastVerifiersEnv(vf.Env[ForecastEnvConfig]):
    """The single-agent episode over the forecasting taskset; consolidates the run when it stops serving."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        await agents.agent.run(task)

    async def stop(self) -> None:
        await asyncio.to_thread(close_services, rollout_run(self.taskset.config.task))

    @property
    def run_dir(self) -> Path:
        """Where this environment's rollouts are recorded (`WS/runs/<run_id>`)."""
        from forecast_env.eval.runs.store import Run

        cfg = self.taskset.config.task
        return Run(cfg.workspace, cfg.run_id).dir


__all__ = ["ForecastHarness", "ForecastTaskset", "ForecastVerifiersEnv", "load_environment"]


# ---------------------------------------------------------------------------------------------
# the entry point
# ---------------------------------------------------------------------------------------------


def load_environment(workspace: str | Path, split: str = "eval", episode: bool = False, *,
                     events: Sequence[str] | None = None, run_id: str | None = None, label: str = "verifiers",
                     env_config: Mapping[str, Any] | None = None, harness: str | None = None,
                     max_turns: int | None = None) -> ForecastVerifiersEnv:
    """A verifiers environment over `split` of the workspace, recorded as run `run_id` (new if None).

    `episode=False`: one rollout per (event, forecast date); `episode=True`: one per event, the notebook
    carried across its dates. `events` narrows the split; `env_config` overrides the `env` config section;
    `harness` names a verifiers harness (default: this module's, which needs no download); `max_turns` caps
    model turns per rollout (default: the date budget + 2, times the event's dates for `episode=True`).
    Drive it with verifiers: `async with env.serving(): await env.run_slot(RunSlot(task), ctx)` per task of
    `env.taskset`, or verifiers' eval runner.
    """
    from forecast_env.store import Workspace

    ws = Workspace.at(workspace)
    if not (ws.events_dir / "manifest.json").exists():
        raise ForecastEnvError(f"{ws.root} has no built events (no {ws.events_dir / 'manifest.json'}); build them "
                               "with `forecast-env events build` first")
    env_cfg = load_config("env", overrides=dict(env_config or {}))
    run_id = run_id or datetime.now(UTC).strftime("%Y%m%d-%H%M%S") + f"-vf-{secrets.token_hex(3)}"
    task_cfg = {"workspace": str(ws.root), "split": split, "episode": bool(episode), "run_id": run_id,
                "label": label, "events": list(events) if events else None, "env": dict(env_config or {})}
    if max_turns is None:
        per_date = int(env_cfg["max_calls_per_date"]) + 2
        max_turns = per_date * (_max_steps(ws.root, split, events) if episode else 1)
    agent: dict[str, Any] = {"runtime": {"type": "subprocess"}, "max_turns": max_turns}
    if harness is not None:
        agent["harness"] = {"id": harness}
    config = vf.resolve_env_config({"taskset": {"id": PLUGIN_ID, "task": task_cfg}, "agent": agent})
    env = vf.load_environment(config)
    if not isinstance(env, ForecastVerifiersEnv):
        raise ForecastEnvError(f"verifiers resolved taskset {PLUGIN_ID!r} to {type(env).__name__}; is the "
                               "forecast_env_verifiers module of this installation importable?")
    ensure_run_record(rollout_run(ForecastTaskConfig.model_validate(task_cfg)))
    return env


def check_task_config(cfg: ForecastTaskConfig) -> None:
    """Refuse a task config without a workspace or run id (verifiers' CLI or a trainer may leave them unset)."""
    missing = [f"env.taskset.task.{k}" for k in ("workspace", "run_id") if not getattr(cfg, k)]
    if missing:
        raise ForecastEnvError(f"{PLUGIN_ID}: set {' and '.join(missing)} (the workspace folder, and a name for the "
                               "run its rollouts are recorded in), or build the environment with "
                               "forecast_env.adapters.verifiers.load_environment")


def rollout_run(cfg: ForecastTaskConfig) -> RolloutRun:
    """The environment service's view of a task config (checked)."""
    check_task_config(cfg)
    return RolloutRun(workspace=cfg.workspace, run_id=cfg.run_id, split=cfg.split, episode=cfg.episode,
                      label=cfg.label, events=tuple(cfg.events) if cfg.events else None, env=dict(cfg.env))


def _max_steps(workspace: Path, split: str, events: Sequence[str] | None) -> int:
    from forecast_env.envs.episodes import load_episodes

    return max((len(e.dates) for e in load_episodes(workspace, split, events)), default=1)


if __name__ == "__main__":
    # verifiers launches a rollout's tool server as `python -m forecast_env.adapters.verifiers`
    ForecastToolset.run()
