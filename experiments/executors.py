"""Run one function over many independent tasks: inline, in local processes, or on Ray.

The sweep hands every executor the same picklable top-level function and the
same tasks, and gets `(task, result)` pairs back as they finish, so the table
it builds does not depend on where the work ran. The function must never
raise (a sweep turns failures into rows); an exception escaping it here is a
bug and is re-raised.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, Callable, Iterator, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")

EXECUTORS = ("local", "ray")


class ExecutorUnavailableError(RuntimeError):
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
) -> Iterator[tuple[T, R]]:
    """Yield `(task, fn(task))` for every task, in completion order.

    local with jobs == 1 runs in this process (handy for debugging and for
    tests that monkeypatch); local with more jobs uses a process pool started
    with "spawn" (safe with torch, whose threads do not survive a fork);
    ray uses the cluster at `address`, or a local Ray started with `jobs` CPUs
    and shut down afterwards.
    """
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    if not tasks:
        return iter(())
    if executor == "local":
        if jobs == 1 or len(tasks) == 1:
            return ((task, fn(task)) for task in tasks)
        return _run_pool(fn, tasks, jobs)
    if executor == "ray":
        return _run_ray(import_ray(), fn, tasks, jobs, address)
    raise ValueError(f"unknown executor {executor!r}; choose one of: {', '.join(EXECUTORS)}")


def _run_pool(fn: Callable[[T], R], tasks: Sequence[T], jobs: int) -> Iterator[tuple[T, R]]:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=context) as pool:
        pending = {pool.submit(fn, task): task for task in tasks}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield pending.pop(future), future.result()


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
    ray: Any, fn: Callable[[T], R], tasks: Sequence[T], jobs: int, address: str | None
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
                yield pending.pop(ref), ray.get(ref)
    finally:
        if started_here:
            ray.shutdown()

