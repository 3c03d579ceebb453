"""Thread helpers shared by the session concurrency tests."""

from __future__ import annotations

import threading

__all__ = ["run_threads"]


def run_threads(n, target):
    """Runs target(i) on n threads started together; returns results, re-raises errors."""
    barrier = threading.Barrier(n)
    results = [None] * n
    errors = []

    def body(i):
        try:
            barrier.wait()
            results[i] = target(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive(), "a thread hangs"
    if errors:
        raise errors[0]
    return results
