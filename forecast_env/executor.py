"""One executor for every parallel stage (docs/design.md §2, §7): the corpus build's per-WARC stages,
the index build's month shards and the runner's episodes all go through `map_unordered`.

A stage gives a per-item function and, optionally, a per-worker `setup` (load a model, open an
environment) whose state the function finds in module-level caches of its own. Engines:

- `local`, one worker (or one item): in this process, `setup` first; nothing is spawned.
- `local`, several workers: a spawned process pool (the parent holds polars/Arrow thread pools that
  fork would copy mid-state); each worker runs `setup` once and uses `threads` compute threads
  (`OMP_NUM_THREADS` and friends), so that the pool, not each worker, fills the cores.
- `ray`: one Ray actor per worker (`num_gpus` each, e.g. GPU actors for embedding), `setup` once per
  actor, items handed to idle actors. Start/shutdown policy: a Ray that is already initialized (or a
  cluster at `ray_address`) is used and left running; a Ray started here is shut down at the end.

Results come back as they complete (not in input order). A worker process that dies raises the
stage's error class with the stage's advice.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from forecast_env.enums import ENGINES
from forecast_env.errors import ForecastEnvError

T = TypeVar("T")
R = TypeVar("R")

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _share_threads(threads: int | None) -> None:
    if threads:
        for name in THREAD_VARS:
            os.environ[name] = str(int(threads))


def _pool_setup(threads: int | None, setup: Callable[..., None] | None, setup_args: tuple) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent stops the pool
    _share_threads(threads)
    if setup is not None:
        setup(*setup_args)


@contextmanager
def ray_session(address: str | None, workers: int, error: type[ForecastEnvError] = ForecastEnvError) -> Iterator[Any]:
    """The `ray` module, initialized: an existing session or cluster is used and left running; a Ray
    started here (local, `workers` CPUs) is shut down on exit."""
    try:
        import ray
    except ImportError as exc:
        raise error("engine 'ray' needs Ray: install the distributed extra (pip install "
                    "'forecast-env[distributed]') or use engine local") from exc
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address:  # an existing cluster: its own resources decide the parallelism
            kwargs["address"] = address
        else:
            kwargs["num_cpus"] = max(1, int(workers))
        ray.init(**kwargs)
        started = True
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


class _Actor:
    """A Ray actor: `setup` once, then any number of items."""

    def __init__(self, fn: Callable[[Any], Any], setup: Callable[..., None] | None, setup_args: tuple):
        self.fn = fn
        if setup is not None:
            setup(*setup_args)

    def run(self, item: Any) -> Any:
        return self.fn(item)


def map_unordered(
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    engine: str = "local",
    workers: int = 1,
    setup: Callable[..., None] | None = None,
    setup_args: tuple = (),
    threads: int | None = 1,
    ray_address: str | None = None,
    num_gpus: float = 0.0,
    error: type[ForecastEnvError] = ForecastEnvError,
    broken_advice: str = "",
) -> Iterator[R]:
    """Yield `fn(item)` for every item as it completes, on the chosen engine (see the module docstring).

    `threads` is the compute threads per worker when there are several (None: leave the environment
    alone); `error` is the stage's error class for a missing Ray or a dead worker, `broken_advice` what
    the user can do then.
    """
    if engine not in ENGINES:
        raise error(f"engine {engine!r} is not known; choose one of {', '.join(ENGINES)}")
    items = list(items)
    if not items:
        return
    if engine == "ray":
        yield from _map_ray(fn, items, workers, setup, setup_args, threads, ray_address, num_gpus, error)
    elif workers <= 1 or len(items) <= 1:
        if setup is not None:
            setup(*setup_args)
        for item in items:
            yield fn(item)
    else:
        yield from _map_pool(fn, items, workers, setup, setup_args, threads, error, broken_advice)


def _map_pool(fn: Callable[[T], R], items: list[T], workers: int, setup: Callable[..., None] | None,
              setup_args: tuple, threads: int | None, error: type[ForecastEnvError], advice: str) -> Iterator[R]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    ctx = multiprocessing.get_context("spawn")
    done = 0
    try:
        with ProcessPoolExecutor(max_workers=min(workers, len(items)), mp_context=ctx, initializer=_pool_setup,
                                 initargs=(threads, setup, setup_args)) as pool:
            futures = [pool.submit(fn, item) for item in items]
            try:
                for fut in as_completed(futures):
                    result = fut.result()
                    done += 1
                    yield result
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: stop now, not after every queued item
                for fut in futures:
                    fut.cancel()
                for proc in list((getattr(pool, "_processes", None) or {}).values()):
                    proc.terminate()
                raise
    except BrokenProcessPool as exc:
        raise error(
            f"a worker process died after {done} of {len(items)} items. Workers are spawned: a script that starts "
            "this with several workers needs an `if __name__ == \"__main__\":` guard; running out of memory is the "
            f"other usual cause (use fewer workers). {advice}".strip()) from exc


def _map_ray(fn: Callable[[T], R], items: list[T], workers: int, setup: Callable[..., None] | None,
             setup_args: tuple, threads: int | None, address: str | None, num_gpus: float,
             error: type[ForecastEnvError]) -> Iterator[R]:
    with ray_session(address, workers, error) as ray:
        options: dict[str, Any] = {"num_cpus": threads or 1, "num_gpus": num_gpus}
        env_vars = {name: str(int(threads)) for name in THREAD_VARS} if threads else {}
        env_vars.update(_storage_env())  # the object store's endpoint and credentials reach every node
        if env_vars:
            options["runtime_env"] = {"env_vars": env_vars}
        if address:
            cpus = int(ray.cluster_resources().get("CPU", workers))
            n_actors = max(1, min(len(items), cpus // int(threads or 1)))
        else:
            n_actors = max(1, min(len(items), workers))
        if num_gpus:
            gpus = float(ray.cluster_resources().get("GPU", 0))
            if gpus < num_gpus:
                raise error(f"the stage asks for GPU actors ({num_gpus} GPU each) but the Ray cluster has {gpus:g} "
                            "GPUs; use device cpu or a cluster with GPUs")
            n_actors = max(1, min(n_actors, int(gpus // num_gpus)))
        actor_cls = ray.remote(**options)(_Actor)
        fn_ref, args_ref = ray.put(fn), ray.put(setup_args)
        yield from _ray_loop(ray, lambda: actor_cls.remote(fn_ref, setup, args_ref), items, n_actors, error)


def _storage_env() -> dict[str, str]:
    """The object-store variables of this process (`remote.worker_env`), for Ray workers on other nodes."""
    try:
        from forecast_env.workspace.remote import worker_env
    except ImportError:
        return {}
    # a node's scratch is the node's own (its FORECAST_ENV_SCRATCH, else its cache): never the driver's path
    return {k: v for k, v in worker_env().items() if k != "FORECAST_ENV_SCRATCH"}


#: How often one item may lose its worker (a dead actor process or node) before the stage gives up.
RAY_ITEM_ATTEMPTS = 4


def _lost_worker(ray: Any, exc: BaseException) -> bool:
    """Whether `exc` says the item's worker went away (process or node died), not that the item failed."""
    lost = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
            ray.exceptions.ObjectLostError, ray.exceptions.OwnerDiedError)
    return isinstance(exc, lost)


def _ray_loop(ray: Any, new_actor: Callable[[], Any], items: list[T], n_actors: int,
              error: type[ForecastEnvError]) -> Iterator[R]:
    """Hand items to idle actors; an item whose actor (or its node) died goes back to the queue and a
    fresh actor takes the dead one's place (Ray schedules it on any node with room). An actor with no
    item left is killed at once, so its CPU is free for a replacement still waiting to be placed."""
    actors = [new_actor() for _ in range(n_actors)]
    pending: dict[Any, tuple[Any, int]] = {}
    queue = list(reversed(range(len(items))))
    lost: dict[int, int] = {}
    try:
        for actor in actors:
            if queue:
                i = queue.pop()
                pending[actor.run.remote(items[i])] = (actor, i)
            else:
                ray.kill(actor)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            actor, i = pending.pop(ready[0])
            try:
                result = ray.get(ready[0])
            except Exception as exc:
                if not _lost_worker(ray, exc):
                    raise
                lost[i] = lost.get(i, 0) + 1
                if lost[i] >= RAY_ITEM_ATTEMPTS:
                    raise error(f"item {i + 1} of {len(items)} lost its Ray worker {lost[i]} times (last: "
                                f"{type(exc).__name__}); check the cluster's nodes (ray status) and rerun: "
                                "finished items are kept") from exc
                with contextlib.suppress(Exception):
                    ray.kill(actor)
                actor = new_actor()
                queue.append(i)  # retried next, on the replacement or any idle actor
                result = _LOST
            if queue:
                j = queue.pop()
                pending[actor.run.remote(items[j])] = (actor, j)
            else:
                ray.kill(actor)
            if result is not _LOST:
                yield result
    finally:
        for actor, _ in pending.values():
            with contextlib.suppress(Exception):
                ray.kill(actor)


_LOST = object()
