"""A real multi-node Ray cluster on one machine, for tests: `ray start --head` plus worker nodes.

Each worker node runs under bubblewrap (`bwrap`), so on one host it still has a disk of its own: the
whole filesystem is read-only to it except its own Ray `--temp-dir`, its own scratch folder (its
`TMPDIR` and `FORECAST_ENV_SCRATCH`) and the folders named `shared` (a stand-in for NFS); the other
nodes' scratch folders and the folders named `hidden` (the driver's own disk) are empty tmpfs mounts
there. A task that writes anywhere else fails with EROFS, so a build that passes on this cluster
touched only its node's scratch, the object store and what was shared on purpose.

Every node gets `--num-cpus` (`cpus`, default 1, for workers; 0 for the head: it hosts the driver, the GCS and the
small zero-CPU actors), a small object store, no dashboard and ports of its own. All processes carry
`FORECAST_ENV_CLUSTER=<id>` in their environment, which is how `leftovers()` finds any that outlive
`stop()`. Ray 2.60 starts token authentication by default; the cluster (loopback only) runs with
`RAY_AUTH_MODE=disabled`, which the driver needs too (`driver_env`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil

RAY = str(Path(sys.executable).with_name("ray"))
OBJECT_STORE_BYTES = 80 * 2**20
#: GCS-side failure detection: a node whose raylet died is declared dead after about 2 s (default ~30 s)
HEAD_ENV = {"RAY_health_check_initial_delay_ms": "1000", "RAY_health_check_period_ms": "500",
            "RAY_health_check_timeout_ms": "500", "RAY_health_check_failure_threshold": "3"}
#: what every process of the cluster and the driver need
DRIVER_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def bwrap_works() -> bool:
    """Whether bubblewrap can make a private mount namespace here."""
    if not shutil.which("bwrap"):
        return False
    try:
        return subprocess.run(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"],
                              capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ports(worker_base: int) -> list[str]:
    return ["--node-manager-port", str(_port()), "--object-manager-port", str(_port()),
            "--min-worker-port", str(worker_base), "--max-worker-port", str(worker_base + 40),
            "--dashboard-agent-listen-port", str(_port()), "--dashboard-agent-grpc-port", str(_port()),
            "--runtime-env-agent-port", str(_port()), "--metrics-export-port", str(_port())]


@dataclass
class Node:
    """One node: its `ray start --block` process (under bwrap for workers), folders and resource name."""

    name: str
    temp: Path
    scratch: Path
    proc: subprocess.Popen
    env: dict[str, str] = field(default_factory=dict)
    alive: bool = True

    def raylet_pid(self) -> int | None:
        """The PID of this node's raylet (None once it is gone)."""
        try:
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                if child.name() == "raylet":
                    return child.pid
        except psutil.NoSuchProcess:
            return None
        return None


class LocalRayCluster:
    """Start with `start()`, stop with `stop()` (or use as a context manager); `address` for the driver."""

    def __init__(self, root: Path, workers: int = 2, shared: tuple[Path, ...] = (), hidden: tuple[Path, ...] = (),
                 worker_env: dict[int, dict[str, str]] | None = None, cpus: int = 1) -> None:
        self.root = Path(root)
        self.n_workers = workers
        self.cpus = int(cpus)  # `--num-cpus` of each worker node
        self.shared = tuple(Path(p) for p in shared)
        self.hidden = tuple(Path(p) for p in hidden)
        self.worker_env = worker_env or {}  # values may name the node's scratch as "{scratch}"
        self.id = uuid.uuid4().hex[:12]
        self.gcs_port = _port()
        self.address = f"127.0.0.1:{self.gcs_port}"
        self.head: Node | None = None
        self.workers: list[Node] = []
        self._base_port = 20000 + (os.getpid() % 200) * 100

    # -- lifecycle -------------------------------------------------------------------------------

    def _env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        # no object-store endpoint or credentials, no scratch of the driver's: those reach a task through
        # Ray's runtime_env (forecast_env.executor), as on a real cluster
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("AWS_") and k not in ("FORECAST_ENV_SCRATCH", "FORECAST_ENV_STORAGE_OPTIONS")}
        env.update(DRIVER_ENV, FORECAST_ENV_CLUSTER=self.id)
        env.update(extra or {})
        return env

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - the node's process keeps it
        try:
            return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        finally:
            log.close()

    def start(self, timeout_s: float = 120.0) -> LocalRayCluster:
        """Start the head and the worker nodes; return when all are alive in the GCS (driver connected)."""
        self._launch(timeout_s)
        self.wait_nodes(1 + self.n_workers, timeout_s)
        return self

    def start_in_background(self, timeout_s: float = 120.0) -> LocalRayCluster:
        """Start the nodes on a thread (the driver can do other work meanwhile); `ready()` waits for them."""
        import threading

        def launch() -> None:
            try:
                self._launch(timeout_s)
            except BaseException as exc:  # reported by ready()
                self._launch_error = exc

        self._launch_error: BaseException | None = None
        self._launcher = threading.Thread(target=launch, daemon=True, name="ray-cluster-start")
        self._launcher.start()
        return self

    def ready(self, timeout_s: float = 120.0) -> LocalRayCluster:
        """Wait for a `start_in_background` to finish and every node to be alive; connect the driver."""
        self._launcher.join(timeout_s)
        if self._launch_error is not None:
            raise self._launch_error
        self.wait_nodes(1 + self.n_workers, timeout_s)
        return self

    def _launch(self, timeout_s: float) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        temp = self.root / "head-temp"
        temp.mkdir()
        cmd = [RAY, "start", "--head", "--block", "--port", str(self.gcs_port), "--num-cpus", "0",
               "--object-store-memory", str(OBJECT_STORE_BYTES), "--include-dashboard", "false",
               "--temp-dir", str(temp), "--disable-usage-stats", *_ports(self._base_port)]
        env = self._env(HEAD_ENV)
        self.head = Node("head", temp, temp, self._spawn("head", cmd, env), env)
        scratches = [self.root / f"scratch-{i}" for i in range(1, self.n_workers + 1)]
        for s in scratches:
            s.mkdir()
        self._wait_for_head(timeout_s)
        for i in range(1, self.n_workers + 1):
            self.add_worker(i, scratches)

    def _wait_for_head(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.head is not None and self.head.proc.poll() is not None:
                raise RuntimeError(f"the Ray head exited: {(self.root / 'head.log').read_text()[-2000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.gcs_port)) == 0:
                    return
            time.sleep(0.2)  # polling a port that is not up yet
        raise RuntimeError(f"the Ray head did not listen on {self.gcs_port} within {timeout_s} s")

    def add_worker(self, i: int, scratches: list[Path] | None = None) -> Node:
        """Start worker node `i` (resource `node<i>`) under bwrap; does not wait for it to join."""
        scratches = scratches or [self.root / f"scratch-{j}" for j in range(1, self.n_workers + 1)]
        temp, scratch = self.root / f"worker-{i}-temp", self.root / f"scratch-{i}"
        temp.mkdir(exist_ok=True)
        scratch.mkdir(exist_ok=True)
        box = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
               "--tmpfs", "/dev/shm", "--bind", str(temp), str(temp), "--bind", str(scratch), str(scratch)]
        covered = [*(o for o in scratches if o != scratch), *self.hidden]
        for other in covered:  # empty there, then read-only (after the shared folders are bound inside)
            box += ["--tmpfs", str(other)]
        for shared in self.shared:
            box += ["--bind", str(shared), str(shared)]
        for other in covered:
            box += ["--remount-ro", str(other)]
        cmd = box + [RAY, "start", "--block", "--address", self.address, "--num-cpus", str(self.cpus),
                     "--object-store-memory", str(OBJECT_STORE_BYTES), "--temp-dir", str(temp),
                     "--resources", json.dumps({f"node{i}": 1}), "--disable-usage-stats",
                     *_ports(self._base_port + 100 * i - 50)]
        env = self._env({"TMPDIR": str(scratch), "FORECAST_ENV_SCRATCH": str(scratch),
                         **{k: v.format(scratch=scratch) for k, v in self.worker_env.get(i, {}).items()}})
        node = Node(f"worker-{i}", temp, scratch, self._spawn(f"worker-{i}", cmd, env), env)
        self.workers.append(node)
        return node

    def alive_nodes(self) -> list[dict]:
        """The GCS's alive nodes (needs a connected driver)."""
        import ray

        return [n for n in ray.nodes() if n.get("Alive")]

    def wait_nodes(self, n: int, timeout_s: float = 120.0) -> None:
        """Wait until exactly `n` nodes are alive (connects the driver when needed)."""
        import ray

        if not ray.is_initialized():
            os.environ.update(DRIVER_ENV)
            ray.init(address=self.address, log_to_driver=False)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if len(self.alive_nodes()) == n:
                return
            for node in self.workers:
                if node.alive and node.proc.poll() is not None:
                    log = (self.root / f"{node.name}.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"Ray {node.name} exited: {log}")
            time.sleep(0.2)  # polling the GCS for the nodes to register
        raise RuntimeError(f"{len(self.alive_nodes())} of {n} Ray nodes alive after {timeout_s} s")

    def kill(self, node: Node) -> int:
        """Kill a worker node as a machine dies: its raylet by PID first (SIGKILL), then every process left
        of the node (its workers, agents, a stopped task). Returns the raylet's PID."""
        pid = node.raylet_pid()
        if pid is None:
            raise RuntimeError(f"{node.name} has no raylet to kill")
        os.kill(pid, signal.SIGKILL)
        self._kill_group(node)
        node.alive = False
        return pid

    def _kill_group(self, node: Node) -> None:
        procs = []
        try:
            procs = [psutil.Process(node.proc.pid), *psutil.Process(node.proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
        procs += self._members(node)
        for p in procs:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(procs, timeout=10)
        node.proc.wait(timeout=10)

    def _members(self, node: Node) -> list[psutil.Process]:
        out = []
        for p in psutil.process_iter(["pid"]):
            try:
                env = p.environ()
            except (psutil.Error, OSError):
                continue
            scratch = env.get("FORECAST_ENV_SCRATCH")
            if env.get("FORECAST_ENV_CLUSTER") == self.id and (scratch == str(node.scratch) if node.name != "head"
                                                                else scratch is None):
                out.append(p)
        return out

    def stop(self) -> None:
        """Disconnect the driver and kill every node's processes (workers first, then the head)."""
        import ray

        if ray.is_initialized():
            ray.shutdown()
        for node in [*self.workers, *([self.head] if self.head else [])]:
            if node.proc.poll() is None or node.alive:
                self._kill_group(node)
                node.alive = False
        for p in self.leftovers():  # anything that left the process groups (a reparented worker)
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass

    def leftovers(self) -> list[psutil.Process]:
        """Processes of this cluster still running (found by their `FORECAST_ENV_CLUSTER` variable)."""
        out = []
        for p in psutil.process_iter(["pid", "status"]):
            try:
                if p.info["status"] == psutil.STATUS_ZOMBIE or p.pid == os.getpid():
                    continue
                if p.environ().get("FORECAST_ENV_CLUSTER") == self.id:
                    out.append(p)
            except (psutil.Error, OSError):
                continue
        return out

    def __enter__(self) -> LocalRayCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
