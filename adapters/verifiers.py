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
there plays each rollout's tool calls. The tool server (one per serving `Env`, taskset-scoped: a server per
rollout cost 2.4x the wall time, benchmarks/RESULTS.md) is a thin MCP shell that forwards each call to it: the
rollout's session id and the service's address reach the tool server through verifiers' rollout state (each
call carries its rollout's state coordinates, signed by verifiers), which the model never sees. The default harness (`ForecastHarness`) runs verifiers' bundled
chat program (the `null` harness's) with this Python instead of a `uv`-built environment, so nothing is
downloaded; any verifiers harness id may be given instead (`harness="null"` needs `uv`).

verifiers resolves a taskset id by importing a top-level module: this one is `forecast_env_verifiers`
(`--env.taskset.id forecast-env-verifiers` on verifiers' own CLI).
"""

import asyncio
import json
import logging
import os
import secrets
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Annotated, Any

import verifiers.v1 as vf
from pydantic import Field, WithJsonSchema
from verifiers.v1.configs.agent import AgentConfig
from verifiers.v1.configs.env import EnvConfig
from verifiers.v1.harnesses.null import NullHarness
from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE
from verifiers.v1.runtimes import SubprocessConfig

from forecast_env.config import load_config
from forecast_env.errors import ForecastEnvError, RunError

log = logging.getLogger(__name__)

#: The taskset (and harness) id verifiers imports: the top-level module `forecast_env_verifiers`.
PLUGIN_ID = "forecast-env-verifiers"
#: Largest accepted JSON size of one tool call's arguments (as for the MCP server).
MAX_ARGUMENT_BYTES = 32_000
#: Seconds a tool server waits for the environment to answer one call (a search on a loaded machine).
CALL_TIMEOUT_S = 300.0

PER_DATE_NOTE = ("This rollout is this one forecast date: it ends when your forecast for {day} is recorded "
                 "(call the forecast tool before budget_left reaches zero).")


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


def _arg(tool: str, name: str) -> Any:
    """An argument the tool server passes through untouched, advertised with the environment's schema."""
    return Annotated[Any, WithJsonSchema(_SPECS[tool]["parameters"]["properties"][name])]


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
    async def search(self, query: _arg("search", "query"), k: _arg("search", "k") = None,
                     mode: _arg("search", "mode") = None) -> str:
        """Search the news corpus. Only articles published on or before the current forecast date are
        searched. Returns ranked hits (doc_id, day, title, url, summary)."""
        return await self._call("search", self._given(query=query, k=k, mode=mode))

    @vf.tool
    async def open_article(self, doc_id: _arg("open_article", "doc_id")) -> str:
        """Read one article (a doc_id from search hits) published on or before the forecast date."""
        return await self._call("open_article", {"doc_id": doc_id})

    @vf.tool
    async def notebook_add(self, claim: _arg("notebook_add", "claim"),
                           date_observed: _arg("notebook_add", "date_observed"),
                           doc_ids: _arg("notebook_add", "doc_ids")) -> str:
        """Record one piece of evidence in the notebook: a short factual claim, the ISO date of the article it
        comes from, and the articles' doc_ids."""
        return await self._call("notebook_add", {"claim": claim, "date_observed": date_observed, "doc_ids": doc_ids})

    @vf.tool
    async def notebook_supersede(self, entry_id: _arg("notebook_supersede", "entry_id"),
                                 reason: _arg("notebook_supersede", "reason")) -> str:
        """Mark an earlier notebook entry as outdated, with the reason."""
        return await self._call("notebook_supersede", {"entry_id": entry_id, "reason": reason})

    @vf.tool
    async def forecast(self, probabilities: _arg("forecast", "probabilities")) -> str:
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
    """Overrides of the `env` config section (forecast_env/defaults/env.yaml)."""


class ForecastTask(vf.Task[ForecastTaskData, ForecastState, ForecastTaskConfig]):
    """One rollout: opens a session at the host's environment service, closes and scores it at the end."""

    @property
    def key(self) -> str:
        return self.data.id or self.hash

    async def setup(self, trace: vf.Trace, runtime: Any) -> None:
        service = service_for(self.config)
        trace.state.session = await asyncio.to_thread(service.open, self.data.event_id, self.data.step, trace.id)
        trace.state.service = service.url

    async def finalize(self, trace: vf.Trace, runtime: Any) -> None:
        from verifiers.v1.dialects.chat import message_to_wire

        service = service_for(self.config)
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
        for data in task_rows(cfg):
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
        await asyncio.to_thread(close_services, self.taskset.config.task)

    @property
    def run_dir(self) -> Path:
        """Where this environment's rollouts are recorded (`WS/runs/<run_id>`)."""
        cfg = self.taskset.config.task
        return Path(cfg.workspace) / "runs" / cfg.run_id


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
    ensure_run_record(ForecastTaskConfig.model_validate(task_cfg))
    return env


def _max_steps(workspace: Path, split: str, events: Sequence[str] | None) -> int:
    from forecast_env.envs.episodes import load_episodes

    return max((len(e.dates) for e in load_episodes(workspace, split, events)), default=1)


# ---------------------------------------------------------------------------------------------
# tasks, the run record
# ---------------------------------------------------------------------------------------------


def task_rows(cfg: ForecastTaskConfig) -> Iterator[dict[str, Any]]:
    """The taskset's rows: per (event, forecast date), or per event, the prompt opening with the observation."""
    from forecast_env.agents.llm import system_prompt
    from forecast_env.envs.forecast_env import ForecastEnv

    check_task_config(cfg)
    env = ForecastEnv(cfg.workspace, split=cfg.split, config=cfg.env, event_ids=cfg.events)
    system = system_prompt()
    try:
        for ep in env.episodes:
            starts = [None] if cfg.episode else [d.step for d in ep.dates]
            for step in starts:
                options = {"event_id": ep.event_id} if step is None else {"event_id": ep.event_id, "step": step}
                obs, _ = env.reset(seed=0, options=options)
                o = json.loads(obs)
                if step is None:
                    prompt = f"A new forecasting episode starts.\n{obs}"
                else:
                    opening = "A new forecasting episode starts." if step == 1 else "A new forecast date starts."
                    prompt = f"{opening} {PER_DATE_NOTE.format(day=o['forecast_date'])}\n{obs}"
                yield {"id": ep.event_id if step is None else f"{ep.event_id}@{step}", "name": ep.question[:200],
                       "event_id": ep.event_id, "step": step, "forecast_date": o["forecast_date"],
                       "system_prompt": system, "prompt": prompt}
    finally:
        env.close()


def check_task_config(cfg: ForecastTaskConfig) -> None:
    """Refuse a task config without a workspace or run id (verifiers' CLI or a trainer may leave them unset)."""
    missing = [f"env.taskset.task.{k}" for k in ("workspace", "run_id") if not getattr(cfg, k)]
    if missing:
        raise ForecastEnvError(f"{PLUGIN_ID}: set {' and '.join(missing)} (the workspace folder, and a name for the "
                               "run its rollouts are recorded in), or build the environment with "
                               "forecast_env.adapters.verifiers.load_environment")


def _event_ids(cfg: ForecastTaskConfig) -> list[str]:
    from forecast_env.envs.episodes import load_episodes

    return [e.event_id for e in load_episodes(Path(cfg.workspace), cfg.split, cfg.events)]


def ensure_run_record(cfg: ForecastTaskConfig) -> Path:
    """Create `WS/runs/<run_id>/run.json` (like a runner's) unless it exists with the same settings."""
    from forecast_env.eval import runner

    from forecast_env.store import Workspace, atomic_write_json

    check_task_config(cfg)
    ws = Workspace.at(cfg.workspace)
    run_dir = ws.runs_dir / cfg.run_id
    path = run_dir / "run.json"
    env_cfg = load_config("env", overrides=dict(cfg.env))  # as the runner records it (the split is its own field)
    unit = "event" if cfg.episode else "date"
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise RunError(f"{path}: unreadable ({exc}); choose a new run_id") from exc
        if old.get("engine") != "verifiers" or old.get("unit") != unit or old.get("split") != cfg.split \
                or old.get("event_ids") != _event_ids(cfg) \
                or (old.get("config") or {}).get("env") != json.loads(json.dumps(dict(env_cfg), default=str)):
            raise RunError(f"{run_dir} holds a run with another engine, unit, split or env config; choose a new "
                           "run_id")
        return run_dir
    ids = _event_ids(cfg)
    spec = runner.AgentSpec("verifiers", cfg.label, {})
    rec = runner.run_record(ws, cfg.run_id, cfg.split, ids, [spec], 1, 0, load_config("benchmark"), env_cfg)
    rec.update(session="episode" if cfg.episode else "per_date", engine="verifiers", unit=unit, mode="episode",
               world=None, status="running")
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, json.loads(json.dumps(rec, default=str)))
    return run_dir


# ---------------------------------------------------------------------------------------------
# the environment service: sessions of rollouts, played on pooled environments
# ---------------------------------------------------------------------------------------------


class _Session:
    """One rollout's environment and its place in the run."""

    def __init__(self, env: Any, event_id: str, step: int | None, rollout: int, trace_id: str) -> None:
        self.env = env
        self.event_id = event_id
        self.step = step
        self.rollout = rollout
        self.trace_id = trace_id
        self.started = time.perf_counter()
        self.done = False  # the unit's forecast is recorded (or its episode terminated)
        self.lock = threading.Lock()


class EnvironmentService:
    """Plays rollouts' tool calls on pooled `ForecastEnv`s and records each finished rollout in the run.

    `open` starts a session at its (event, date) or event, `call` plays one tool call (never raises for
    anything the model sends), `finish` closes a session (the empty report for an unforecast unit), writes its
    part and returns its scores and reward, `close` records what is left and consolidates the run. Calls reach
    it over HTTP from the rollouts' tool servers (`url`); all environment work is serialized by one lock.
    """

    def __init__(self, cfg: ForecastTaskConfig) -> None:
        from forecast_env.store import Workspace

        self.cfg = cfg
        self.ws = Workspace.at(cfg.workspace)
        self.run_dir = ensure_run_record(cfg)
        self.record = json.loads((self.run_dir / "run.json").read_text())
        self.session_kind = "episode" if cfg.episode else "per_date"
        self._env_lock = threading.Lock()
        self._lock = threading.Lock()
        self._idle: list[Any] = []
        self._owner: Any = None  # the environment whose searcher every pooled environment shares
        self._sessions: dict[str, _Session] = {}
        self._closed = False
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, name="forecast-env-verifiers", daemon=True).start()
        host, port = self._httpd.server_address[:2]
        self.url = f"http://{host}:{port}"

    # -- sessions ---------------------------------------------------------------------------------

    def open(self, event_id: str, step: int | None, trace_id: str = "") -> str:
        """Start a rollout's session at (event, step) (step None: the whole event); returns its id."""
        with self._env_lock:
            env = self._acquire()
            rollout = self._claim_rollout(event_id)
            env.unwrapped.rollout = rollout
            options: dict[str, Any] = {"event_id": event_id, "rollout": rollout}
            if step is not None:
                options["step"] = step
            try:
                env.reset(seed=0, options=options)
            except Exception:
                self._idle.append(env)
                raise
        sid = secrets.token_urlsafe(24)
        with self._lock:
            self._sessions[sid] = _Session(env, event_id, step, rollout, trace_id)
        return sid

    def call(self, sid: str, tool: Any, arguments: Any) -> dict[str, Any]:
        """Play one tool call: `{"text", "is_error", "finished"}`; errors are replies, never exceptions."""
        session = self._sessions.get(sid) if isinstance(sid, str) else None
        if session is None:
            return _error("unknown session: this rollout's environment session does not exist (or is closed)")
        with session.lock:
            if session.done:
                return {**_error(self._over(session)), "finished": True}
            if not isinstance(tool, str) or (tool not in _SPECS and tool != "observe"):
                return _error(f"unknown tool {str(tool)[:80]!r}; tools: observe, {', '.join(sorted(_SPECS))}")
            if not isinstance(arguments, dict):
                return _error(f"{tool}: arguments must be a JSON object")
            size = len(json.dumps(arguments, default=str).encode())
            if size > MAX_ARGUMENT_BYTES:
                return _error(f"{tool}: arguments are {size:,} bytes; the limit is {MAX_ARGUMENT_BYTES:,}")
            env = session.env
            with self._env_lock:
                if tool == "observe":
                    if arguments:
                        return _error("observe takes no arguments")
                    return {"text": env.unwrapped.episode_log()["steps"][-1]["observation"], "is_error": False,
                            "finished": False}
                obs, _reward, _terminated, _trunc, info = env.step({"tool": tool, "args": arguments})
            error = bool(info.get("error")) if isinstance(info, Mapping) else False
            if self._unit_done(session):
                session.done = True
                return {"text": self._closing(session, obs), "is_error": error, "finished": True}
            return {"text": obs, "is_error": error, "finished": False}

    def finish(self, sid: str, messages: list[dict[str, Any]] | None, model: str | None = None) -> dict[str, Any]:
        """Close a rollout's session: the empty report for its unforecast dates, then its part; returns its
        scored dates and reward."""
        session = self._pop(sid)
        if session is None:
            raise RunError(f"finish: no open session {str(sid)[:12]!r} (the rollout's setup did not open one)")
        with session.lock, self._env_lock:
            env = session.env
            for _ in range(len(env.unwrapped.current_event.dates) + 1):
                if self._unit_done(session):
                    break
                env.step({"tool": "forecast", "args": {"probabilities": {}}})
            result = self._write(session, messages, model, complete=True)
            self._idle.append(env)
        return result

    def close(self) -> None:
        """Record the sessions still open (their unplayed dates missing), consolidate the run, stop serving."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            left = list(self._sessions)
        for sid in left:
            session = self._pop(sid)
            if session is None:
                continue
            with session.lock, self._env_lock:
                for _ in range(len(session.env.unwrapped.current_event.dates) + 1):
                    if self._unit_done(session):
                        break
                    session.env.skip_date("the rollout ended before its forecast (it failed or was abandoned)")
                self._write(session, None, None, complete=False)
                self._idle.append(session.env)
        self._httpd.shutdown()
        self._httpd.server_close()
        try:
            self.consolidate()
        finally:
            for env in [e for e in self._idle if e is not self._owner] + ([self._owner] if self._owner else []):
                env.close()
            self._idle.clear()

    def consolidate(self) -> dict[str, Any]:
        """Write the run's tables from its parts and update run.json (status, counts, summary)."""
        import polars as pl
        from forecast_env.eval import runner
        from forecast_env.eval.metrics import quick_summary

        from forecast_env.store import atomic_write_json, write_manifest

        ids = list(self.record["event_ids"])
        counts = runner.consolidate(self.run_dir, self.ws.root, self.cfg.run_id, ids)
        summary = quick_summary(pl.read_parquet(self.run_dir / "forecasts.parquet"))
        parts = list(runner.iter_parts(self.run_dir))
        rec = json.loads((self.run_dir / "run.json").read_text())
        rec.update(status="complete" if parts and all(p.get("complete", True) for p in parts) else "incomplete",
                   episodes_done=counts["episodes"], rollouts_recorded=len(parts), summary=summary.to_dicts())
        atomic_write_json(self.run_dir / "run.json", json.loads(json.dumps(rec, default=str)))
        write_manifest(self.run_dir, "run", files=[self.run_dir / n for n in (
            "forecasts.parquet", "tool_calls.parquet", "notebook.parquet", "trajectories.jsonl", "events.parquet",
            "market.parquet")], extra={"run_id": self.cfg.run_id})
        return counts

    # -- internals --------------------------------------------------------------------------------

    def _acquire(self) -> Any:
        if self._closed:
            raise RunError("the environment service is closed; load the environment again")
        if self._idle:
            return self._idle.pop()
        from forecast_env.envs.forecast_env import ForecastEnv

        overrides = dict(self.cfg.env)
        if self._owner is None:
            self._owner = ForecastEnv(self.ws.root, split=self.cfg.split, config=overrides)
            return self._owner
        return ForecastEnv(self.ws.root, split=self.cfg.split, config=overrides, searcher=self._owner.searcher)

    def _claim_rollout(self, event_id: str) -> int:
        """The next rollout number of (label, event) in the run, claimed with an exclusive file so that
        processes recording into one run never share one."""
        from forecast_env.eval import runner

        folder = runner.part_path(self.run_dir, runner.Task(self.cfg.label, event_id, 0)).parent
        folder.mkdir(parents=True, exist_ok=True)
        k = 0
        while True:
            try:
                os.close(os.open(folder / f"r{k}.claimed", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                return k
            except FileExistsError:
                k += 1

    def _pop(self, sid: Any) -> _Session | None:
        with self._lock:
            return self._sessions.pop(sid, None) if isinstance(sid, str) else None

    def _unit_done(self, session: _Session) -> bool:
        log_ = session.env.unwrapped.episode_log()
        if session.step is not None:
            return any(r["step"] == session.step for r in log_["forecasts"])
        return bool(log_["steps"]) and bool(log_["steps"][-1].get("terminated"))

    def _over(self, session: _Session) -> str:
        what = "the event's last forecast" if session.step is None else "this date's forecast"
        return f"this rollout is over: {what} is recorded, and no further tool call is played"

    def _closing(self, session: _Session, obs: str) -> str:
        """The reply that ends a unit: the forecast receipt (no score), and that the rollout is over."""
        o = json.loads(obs)
        if session.step is None:
            return json.dumps({"message": "the event's last forecast is recorded: this rollout is over",
                               "last_observation": o})
        row = next(r for r in session.env.unwrapped.episode_log()["forecasts"] if r["step"] == session.step)
        note = f"the forecast for {row['forecast_date']} is recorded: this rollout is over"
        if row.get("fallback") == "budget_exhausted":
            note = f"the call budget of {row['forecast_date']} is spent: the uniform forecast was recorded and " \
                   "this rollout is over"
        return json.dumps({"message": note, "tool_result": o.get("tool_result"), "error": o.get("error")},
                          default=str)

    def _write(self, session: _Session, messages: Any, model: str | None, complete: bool) -> dict[str, Any]:
        from forecast_env.eval import runner

        log_ = session.env.unwrapped.episode_log()
        forecasts = [r for r in log_["forecasts"] if session.step is None or r["step"] == session.step]
        log_ = {**log_, "forecasts": forecasts,
                "tool_calls": [r for r in log_["tool_calls"] if session.step is None or r["step"] == session.step],
                "notebook": [r for r in log_["notebook"] if session.step is None or r["step"] == session.step]}
        ctx = {"run_id": self.cfg.run_id, "run_dir": str(self.run_dir)}
        runner.write_part(ctx, runner.Task(self.cfg.label, session.event_id, session.rollout), log_, messages, 0,
                          round(time.perf_counter() - session.started, 3),
                          extra={"session": self.session_kind, "complete": complete, "engine": "verifiers",
                                 "unit_step": session.step, "model": model, "trace_id": session.trace_id})
        scores = [{k: r.get(k) for k in ("step", "forecast_date", "brier", "accuracy", "log_vs_market", "fallback")}
                  for r in forecasts if not r.get("missing") and r.get("brier") is not None]
        scores = json.loads(json.dumps(scores, default=str))
        reward = -sum(s["brier"] for s in scores) / len(scores) if scores else 0.0
        return {"scores": scores, "reward": reward, "rollout": session.rollout}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                    body = json.loads(self.rfile.read(length)) if self.path == "/call" else None
                    if not isinstance(body, dict):
                        reply, code = _error("POST /call with a JSON object"), 400
                    else:
                        reply, code = service.call(body.get("session"), body.get("tool"), body.get("arguments")), 200
                except Exception as exc:  # a bug: the tool server still gets an answer
                    log.error("environment service: call failed", exc_info=True)
                    reply, code = _error(f"internal error {type(exc).__name__}: {str(exc)[:200]}"), 200
                data = json.dumps(reply, default=str).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _error(message: str) -> dict[str, Any]:
    return {"text": json.dumps({"error": message}), "is_error": True, "finished": False}


_SERVICES: dict[str, EnvironmentService] = {}
_SERVICES_LOCK = threading.Lock()


def _service_key(cfg: ForecastTaskConfig) -> str:
    return json.dumps(cfg.model_dump(mode="json", exclude={"tools"}), sort_keys=True, default=str)


def service_for(cfg: ForecastTaskConfig) -> EnvironmentService:
    """This process's environment service for a task config (started at first use)."""
    key = _service_key(cfg)
    with _SERVICES_LOCK:
        service = _SERVICES.get(key)
        if service is None or service._closed:
            service = _SERVICES[key] = EnvironmentService(cfg)
        return service


def close_services(cfg: ForecastTaskConfig | None = None) -> None:
    """Close (record, consolidate) this process's service for `cfg`, or all of them."""
    with _SERVICES_LOCK:
        keys = [k for k in _SERVICES if cfg is None or k == _service_key(cfg)]
        services = [_SERVICES.pop(k) for k in keys]
    for service in services:
        service.close()


if __name__ == "__main__":
    # verifiers launches a rollout's tool server as `python -m forecast_env.adapters.verifiers`
    ForecastToolset.run()
