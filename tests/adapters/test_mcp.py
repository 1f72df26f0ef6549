"""The MCP server, driven by the official SDK's client over stdio (a subprocess) and streamable HTTP.

Each test starts `forecast-env mcp` as a real server process on the micro workspace and plays through it
as a harness would; the recorded run must then read like a runner's.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from mcp import Client, StdioServerParameters, stdio_client

from tests.support.leaks import SCORE_KEYS, nested_keys

TOOLS = {"observe", "search", "open_article", "notebook_add", "notebook_supersede", "forecast"}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "PATH", "HOME", "HF_HUB_OFFLINE",
                                                          "TRANSFORMERS_OFFLINE", "OMP_NUM_THREADS")}
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    return env


def _server_args(ws: Path, run_id: str, *extra: str) -> list[str]:
    return ["-m", "forecast_env.cli.main", "mcp", "--workspace", str(ws), "--run-id", run_id, *extra]


def _text(result: Any) -> str:
    return result.content[0].text


def _first_event(ws: Path) -> tuple[str, int]:
    from forecast_env.envs import ForecastEnv

    env = ForecastEnv(ws, split="eval")
    obs, _ = env.reset(options={"event_id": env.event_ids[0]})
    return env.event_ids[0], json.loads(obs)["steps_total"]


async def _play_episode(client: Client, steps: int) -> list[dict]:
    """search, open, note, forecast on every date; return every tool result as JSON."""
    seen = []
    for _ in range(steps):
        obs = json.loads(_text(await client.call_tool("observe", {})))
        seen.append(obs)
        hits = json.loads(_text(await client.call_tool("search", {"query": obs["question"], "k": 3})))
        seen.append(hits)
        found = (hits.get("tool_result") or {}).get("hits") or []
        if found:
            seen.append(json.loads(_text(await client.call_tool("open_article", {"doc_id": found[0]["doc_id"]}))))
            seen.append(json.loads(_text(await client.call_tool("notebook_add", {
                "claim": "read one article", "date_observed": obs["forecast_date"],
                "doc_ids": [found[0]["doc_id"]]}))))
        uniform = {o: 1.0 / len(obs["options"]) for o in obs["options"]}
        seen.append(json.loads(_text(await client.call_tool("forecast", {"probabilities": uniform}))))
    return seen


@pytest.mark.slow
def test_stdio_whole_episode_recorded_as_harness_run(micro_events: Path) -> None:
    ws = micro_events
    event_id, steps = _first_event(ws)
    params = StdioServerParameters(command=sys.executable,
                                   args=_server_args(ws, "mcp-stdio", "--event", event_id), env=_env())

    async def main() -> tuple[set[str], dict, list[dict], dict]:
        async with Client(stdio_client(params)) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            seen = [json.loads(_text(await client.call_tool("observe", {})))]
            seen += await _play_episode(client, steps)
            after = await client.call_tool("observe", {})
            return set(listed), dict(listed["search"].input_schema), seen, {"after": _text(after),
                                                                             "error": after.is_error}

    names, search_schema, seen, after = asyncio.run(main())
    assert names == TOOLS
    from forecast_env.envs import ForecastEnv

    spec = next(s.get("function", s) for s in ForecastEnv(ws, split="eval").tool_specs
                if s.get("function", s)["name"] == "search")
    assert search_schema == spec["parameters"]  # the environment's own schema, not a re-derivation
    assert not (nested_keys(seen) & SCORE_KEYS), nested_keys(seen) & SCORE_KEYS
    assert after["error"] and "finished" in after["after"]

    run_dir = ws / "runs" / "mcp-stdio"
    rec = json.loads((run_dir / "run.json").read_text())
    assert rec["session"] == "harness" and rec["status"] == "complete"
    forecasts = pl.read_parquet(run_dir / "forecasts.parquet")
    assert forecasts["agent"].unique().to_list() == ["harness"]
    assert forecasts.height == steps and forecasts["brier"].null_count() == 0
    # the recorded run reports like any other run
    from forecast_env.eval.report.render import build_report

    build_report(run_dir)
    assert (run_dir / "report.md").exists()


@pytest.mark.slow
def test_stdio_hostile_arguments_and_the_date_cannot_move(micro_events: Path) -> None:
    ws = micro_events
    event_id, _ = _first_event(ws)
    params = StdioServerParameters(command=sys.executable,
                                   args=_server_args(ws, "mcp-hostile", "--event", event_id), env=_env())

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(stdio_client(params)) as client:
            out["date0"] = json.loads(_text(await client.call_tool("observe", {})))["forecast_date"]
            out["unknown_tool"] = await client.call_tool("rm_rf", {})
            out["as_of"] = await client.call_tool("search", {"query": "vote", "as_of": "2099-01-01"})
            out["date_arg"] = await client.call_tool("open_article", {"doc_id": "x", "date": "2099-01-01"})
            out["wrong_type"] = await client.call_tool("search", {"query": "vote", "k": "ten"})
            out["huge"] = await client.call_tool("search", {"query": "x" * 1_000_000})
            out["path_id"] = await client.call_tool("open_article", {"doc_id": "../../../../etc/passwd"})
            out["unknown_id"] = await client.call_tool("open_article", {"doc_id": "no-such-doc"})
            out["bad_probs"] = await client.call_tool("forecast", {"probabilities": "all in on yes"})
            out["date1"] = json.loads(_text(await client.call_tool("observe", {})))["forecast_date"]
        return out

    out = asyncio.run(main())
    for key in ("unknown_tool", "as_of", "date_arg", "wrong_type", "huge", "path_id", "unknown_id", "bad_probs"):
        assert out[key].is_error, key
    assert "unknown tool" in _text(out["unknown_tool"])
    assert "limit" in _text(out["huge"])
    # a path-like id is refused exactly like any unknown id (no existence oracle, no file access)
    assert json.loads(_text(out["path_id"]))["error"] == json.loads(_text(out["unknown_id"]))["error"].replace(
        "no-such-doc", "../../../../etc/passwd")
    assert out["date0"] == out["date1"]  # nothing an argument says moves the server's date


@pytest.mark.slow
def test_stdio_disconnect_mid_episode_keeps_what_was_played(micro_events: Path) -> None:
    ws = micro_events
    event_id, steps = _first_event(ws)
    params = StdioServerParameters(command=sys.executable,
                                   args=_server_args(ws, "mcp-drop", "--event", event_id), env=_env())

    async def main() -> None:
        async with Client(stdio_client(params)) as client:
            obs = json.loads(_text(await client.call_tool("observe", {})))
            await client.call_tool("search", {"query": obs["question"]})
            if steps > 1:
                await client.call_tool("forecast", {"probabilities": [1.0] * len(obs["options"])})
        # leaving the block closes stdin: the client is gone mid-episode

    asyncio.run(main())
    run_dir = ws / "runs" / "mcp-drop"
    deadline = time.time() + 60
    while time.time() < deadline and json.loads((run_dir / "run.json").read_text())["status"] == "running":
        time.sleep(0.2)
    rec = json.loads((run_dir / "run.json").read_text())
    assert rec["status"] == "incomplete"
    part = json.loads(next((run_dir / "parts").glob("*/*/r0.json")).read_text())
    assert part["complete"] is False and part["tool_calls"], part.keys()
    forecasts = pl.read_parquet(run_dir / "forecasts.parquet")
    assert forecasts.height == (1 if steps > 1 else 0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_http_needs_the_token_and_serves_one_session(micro_events: Path) -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    ws = micro_events
    event_id, steps = _first_event(ws)
    port = _free_port()
    proc = subprocess.Popen([sys.executable, *_server_args(ws, "mcp-http", "--event", event_id, "--transport",
                                                           "http", "--port", str(port), "--token", "s3cret")],
                            stderr=subprocess.PIPE, text=True, env=_env())
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.time() + 180
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read()
                assert time.time() < deadline, "server did not start"
                time.sleep(0.2)
        assert httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize"}).status_code == 401
        assert httpx2.post(url, json={}, headers={"Authorization": "Bearer wrong"}).status_code == 401

        def client() -> Client:
            return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(
                headers={"Authorization": "Bearer s3cret"}, timeout=httpx2.Timeout(30.0, read=300.0))))

        async def main() -> tuple[set[str], bool, list[dict]]:
            async with client() as first:
                names = {t.name for t in (await first.list_tools()).tools}
                refused = False
                try:
                    async with client() as second:
                        await second.list_tools()
                except Exception:
                    refused = True
                seen = await _play_episode(first, steps)
            return names, refused, seen

        names, refused, seen = asyncio.run(main())
        assert names == TOOLS
        assert refused, "a second client session must be refused"
        assert not (nested_keys(seen) & SCORE_KEYS)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    rec = json.loads((ws / "runs" / "mcp-http" / "run.json").read_text())
    assert rec["status"] == "complete" and rec["session"] == "harness"
    assert pl.read_parquet(ws / "runs" / "mcp-http" / "forecasts.parquet").height == steps


HARNESS = '''
import asyncio, json, socket, sys
from pathlib import Path
from mcp import Client, StdioServerParameters, stdio_client

ws, port, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = {"workspace_visible": Path(ws).exists()}
try:
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    out["network"] = True
except OSError:
    out["network"] = False

async def main():
    params = StdioServerParameters(command=sys.executable, args=["/relay/mcp_relay.py", "/run/fe/mcp.sock"])
    async with Client(stdio_client(params)) as client:
        for _ in range(steps):
            obs = json.loads((await client.call_tool("observe", {})).content[0].text)
            await client.call_tool("search", {"query": obs["question"]})
            await client.call_tool("forecast", {"probabilities": [1.0] * len(obs["options"])})
        out["played"] = steps

asyncio.run(main())
print(json.dumps(out))
'''


@pytest.mark.slow
def test_sandboxed_harness_reaches_only_the_server(micro_events: Path, tmp_path: Path) -> None:
    """The README's recipe: server outside, harness in bubblewrap with no network and no workspace."""
    import shutil

    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bubblewrap is not installed (apt-get install bubblewrap)")
    ws = micro_events
    event_id, steps = _first_event(ws)
    sock_dir, relay_dir = tmp_path / "sock", tmp_path / "relay"
    sock_dir.mkdir()
    relay_dir.mkdir()
    import forecast_env.adapters.mcp_relay as relay_module

    shutil.copy(relay_module.__file__, relay_dir / "mcp_relay.py")
    (relay_dir / "harness.py").write_text(HARNESS)
    sock = sock_dir / "mcp.sock"
    server = subprocess.Popen([sys.executable, *_server_args(ws, "mcp-sandbox", "--event", event_id, "--transport",
                                                             "unix", "--socket", str(sock))],
                              stderr=subprocess.PIPE, text=True, env=_env())
    outside = socket.socket()
    outside.bind(("127.0.0.1", 0))
    outside.listen(1)  # something the harness must not be able to reach
    try:
        deadline = time.time() + 180
        while not sock.exists():
            assert server.poll() is None, server.stderr.read()
            assert time.time() < deadline, "server did not start"
            time.sleep(0.2)
        venv = Path(sys.prefix)
        base = Path(sys.base_prefix)
        binds = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc", "--ro-bind", str(base), str(base),
                 "--ro-bind", str(venv), str(venv), "--ro-bind", str(relay_dir), "/relay",
                 "--bind", str(sock_dir), "/run/fe"]
        for lib in ("/lib", "/lib64", "/bin", "/sbin"):
            if Path(lib).exists():
                binds += ["--ro-bind", lib, lib]
        # a private home (not a tmpfs on /tmp: that would hide a virtual environment that lives under /tmp)
        cmd = [bwrap, *binds, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/sandbox-home", "--unshare-all",
               "--die-with-parent", "--setenv", "HOME", "/sandbox-home", sys.executable, "/relay/harness.py", str(ws),
               str(outside.getsockname()[1]), str(steps)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        outside.close()
        try:
            server.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
    assert result == {"workspace_visible": False, "network": False, "played": steps}
    rec = json.loads((ws / "runs" / "mcp-sandbox" / "run.json").read_text())
    assert rec["status"] == "complete"
    assert pl.read_parquet(ws / "runs" / "mcp-sandbox" / "forecasts.parquet").height == steps


@pytest.mark.slow
def test_world_mode_over_stdio(micro_events: Path) -> None:
    """--world: the shared clock's tools (next_day, get_question) over MCP, recorded as a world run."""
    ws = micro_events
    params = StdioServerParameters(command=sys.executable, args=_server_args(ws, "mcp-world", "--world"), env=_env())

    async def main() -> tuple[set[str], list[dict], int]:
        seen: list[dict] = []
        async with Client(stdio_client(params)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            days = 0
            while True:
                obs = json.loads(_text(await client.call_tool("observe", {})))
                seen.append(obs)
                for q in obs.get("questions") or []:
                    if q["question_id"] not in (obs.get("standing") or {}):
                        seen.append(json.loads(_text(await client.call_tool("get_question", {
                            "question_id": q["question_id"]}))))
                        seen.append(json.loads(_text(await client.call_tool("forecast", {
                            "question_id": q["question_id"],
                            "probabilities": [1.0] * len(q["options"])}))))
                reply = json.loads(_text(await client.call_tool("next_day", {})))
                seen.append(reply)
                days += 1
                if "last_observation" in reply:  # the world's last day has ended
                    break
        return names, seen, days

    names, seen, days = asyncio.run(main())
    assert {"observe", "next_day", "get_question", "forecast", "search"} <= names
    assert not (nested_keys(seen) & SCORE_KEYS)
    run_dir = ws / "runs" / "mcp-world"
    rec = json.loads((run_dir / "run.json").read_text())
    assert rec["mode"] == "world" and rec["session"] == "harness" and rec["status"] == "complete"
    forecasts = pl.read_parquet(run_dir / "forecasts.parquet")
    assert forecasts.height > 0 and forecasts["brier"].null_count() == 0
    assert days > 1 and (run_dir / "world_days.parquet").exists()
