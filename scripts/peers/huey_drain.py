#!/usr/bin/env python3
"""The peer figure beside `daicho-bench claims` (issue 17): huey's durable drain rate on SQLite.

  python3 scripts/peers/huey_drain.py N DIR

Enqueues N trivial tasks into a SqliteHuey file in DIR (WAL, fsync=True: synchronous=FULL, as
daicho's ledger), then drains them with one worker the way huey's consumer does (dequeue, execute,
store the result; each a commit of its own) and prints one JSON line:
{"tasks": N, "seconds": S, "tasks_per_s": R, "huey": VERSION}. Without huey installed
(`pip install huey==3.5.4`) it prints {"error": "..."} and exits 3, and the bench says so.
"""

import json
import os
import sys
import time


def main():
    n, directory = int(sys.argv[1]), sys.argv[2]
    try:
        import huey
        from huey import SqliteHuey
    except ImportError as e:
        print(json.dumps({"error": f"huey is not installed ({e}); pip install huey==3.5.4"}))
        return 3
    path = os.path.join(directory, "huey-drain.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    queue = SqliteHuey("bench", filename=path, fsync=True, journal_mode="wal")

    @queue.task()
    def noop(i):
        return i

    for i in range(n):
        noop(i)
    assert len(queue) == n, len(queue)
    started = time.perf_counter()
    drained = 0
    while True:
        task = queue.dequeue()
        if task is None:
            break
        queue.execute(task)
        drained += 1
    took = time.perf_counter() - started
    assert drained == n, drained
    print(json.dumps({"tasks": n, "seconds": took, "tasks_per_s": n / took, "huey": huey.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
