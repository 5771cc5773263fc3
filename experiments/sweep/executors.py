"""Run one function over many independent tasks: inline, in local processes, or on Ray.

The sweep hands every executor the same picklable top-level function and the
same tasks, and gets `(task, result)` pairs back as they finish, so the table
it builds does not depend on where the work ran. The function must never
raise (a sweep turns failures into rows); an exception escaping it here is a
bug and is re-raised. A worker process that dies (a crash in native code) is
replaced, and its task's result comes from `crashed(task, error)` if given.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Generic, TypeVar

from memplan.errors import MemplanError

T = TypeVar("T")
R = TypeVar("R")

EXECUTORS = ("local", "ray")


class ExecutorUnavailableError(MemplanError, RuntimeError):
    """The requested executor cannot run here (e.g. Ray is not installed)."""


def default_jobs() -> int:
    """One worker per core this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def run_all(
    fn: Callable[[T], R],
    tasks: Sequence[T],
    executor: str = "local",
    jobs: int | None = None,
    address: str | None = None,
    affinity: Callable[[T], Hashable] | None = None,
    crashed: Callable[[T, BaseException], R] | None = None,
    isolate: bool = False,
) -> Iterator[tuple[T, R]]:
    """Yield `(task, fn(task))` for every task, in completion order.

    local with jobs == 1 runs in this process (handy for debugging and for
    tests that monkeypatch) unless `isolate` asks for a worker process even
    then, so that a crash in native code becomes `crashed(task, error)` instead
    of the end of this process; local with more jobs uses worker processes
    started with "spawn" (safe with torch, whose threads do not survive a
    fork), and sends tasks with the same `affinity` key to the same worker
    while it has them, so what a worker caches per key (an exported model) is
    reused; ray uses the cluster at `address`, or a local Ray started with
    `jobs` CPUs and shut down afterwards, and ignores `affinity`.
    """
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    if not tasks:
        return iter(())
    if executor == "local":
        if not isolate and (jobs == 1 or len(tasks) == 1):
            return ((task, fn(task)) for task in tasks)
        return _run_pool(fn, tasks, jobs, affinity or id, crashed)
    if executor == "ray":
        return _run_ray(import_ray(), fn, tasks, jobs, address, crashed)
    raise ValueError(f"unknown executor {executor!r}; choose one of: {', '.join(EXECUTORS)}")


class AffinityQueue(Generic[T]):
    """Hands tasks to workers so that tasks sharing a key stay on one worker while it has them."""

    def __init__(self, tasks: Sequence[T], affinity: Callable[[T], Hashable], workers: int) -> None:
        self.queues: dict[Hashable, deque[T]] = {}  # key -> its tasks still to start, in order
        for task in tasks:
            self.queues.setdefault(affinity(task), deque()).append(task)
        self.key_of: list[Hashable | None] = [None] * workers  # the key each worker is on

    def take(self, worker: int) -> T | None:
        """The worker's next task: its own key first, then a key nobody is on, then the longest queue."""
        key = self.key_of[worker]
        if key not in self.queues:
            free = [k for k in self.queues if k not in self.key_of]
            key = free[0] if free else max(self.queues, key=lambda k: len(self.queues[k]), default=None)
            if key is None:
                return None
            self.key_of[worker] = key
        task = self.queues[key].popleft()
        if not self.queues[key]:
            del self.queues[key]
        return task


def _run_pool(
    fn: Callable[[T], R],
    tasks: Sequence[T],
    jobs: int,
    affinity: Callable[[T], Hashable],
    crashed: Callable[[T, BaseException], R] | None,
) -> Iterator[tuple[T, R]]:
    """One single-process pool per worker, so that a task can go to the worker that ran its key."""
    context = multiprocessing.get_context("spawn")
    new_worker = functools.partial(
        ProcessPoolExecutor,
        max_workers=1,
        mp_context=context,
        initializer=watch_parent,
        initargs=(os.getpid(),),
    )
    workers = [new_worker() for _ in range(min(jobs, len(tasks)))]
    queue = AffinityQueue(tasks, affinity, len(workers))
    running: dict[Future, tuple[int, T]] = {}

    def submit(worker: int) -> None:
        task = queue.take(worker)
        if task is not None:
            running[workers[worker].submit(fn, task)] = (worker, task)

    try:
        for worker in range(len(workers)):
            submit(worker)
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                worker, task = running.pop(future)
                try:
                    result = future.result()
                except BrokenProcessPool as exc:
                    if crashed is None:
                        raise
                    result = crashed(task, exc)
                    workers[worker].shutdown(wait=False)
                    workers[worker] = new_worker()
                submit(worker)
                yield task, result
    finally:
        for pool in workers:
            pool.shutdown(cancel_futures=True)


PARENT_POLL_S = 0.5
"""How often a worker checks that the process that started it is still alive."""


def watch_parent(parent: int) -> None:
    """Exit this worker once `parent` is gone (e.g. killed with SIGKILL, which runs no cleanup).

    Runs as the worker's initializer: a daemon thread polls the parent pid.
    Without it the workers of a killed sweep live on, and with them
    multiprocessing's resource tracker, which waits for every holder of its pipe.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="memplan-watch-parent", daemon=True).start()


def import_ray():
    """The `ray` module, or a one-line explanation of how to get it."""
    try:
        import ray
    except ImportError:
        raise ExecutorUnavailableError(
            "the ray executor needs Ray: pip install 'memplan[ray]' (or pip install 'ray[default]')"
        ) from None
    return ray


def _run_ray(
    ray: Any,
    fn: Callable[[T], R],
    tasks: Sequence[T],
    jobs: int,
    address: str | None,
    crashed: Callable[[T, BaseException], R] | None,
) -> Iterator[tuple[T, R]]:
    started_here = not ray.is_initialized()
    if started_here:
        try:
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = f"the Ray cluster at {address!r}" if address else "a local Ray"
            raise ExecutorUnavailableError(f"cannot start {where}: {exc}") from None
    try:
        remote_fn = ray.remote(num_cpus=1)(fn)
        pending = {remote_fn.remote(task): task for task in tasks}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                task = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.WorkerCrashedError as exc:
                    if crashed is None:
                        raise
                    result = crashed(task, exc)
                yield task, result
    finally:
        if started_here:
            ray.shutdown()
