"""The process pool of a run: workers that die with their parent and leave Ctrl-C to it.

A worker of a plain ``ProcessPoolExecutor`` outlives a parent killed with SIGKILL: it finishes
the work already queued (rewriting files nobody will report) and then waits forever for more.
Here each worker ends as soon as its parent does: on Linux the kernel sends it SIGKILL
(``PR_SET_PDEATHSIG``); everywhere, a thread waits on multiprocessing's parent sentinel, which
also covers a parent that died before the worker could ask the kernel.

Ctrl-C reaches the whole process group, workers too. A forked worker starts with the parent's
Python handler (KeyboardInterrupt) until its initializer ignores SIGINT; a Ctrl-C in between
killed it with a traceback. So the workers are started while SIGINT is blocked in the parent: they
inherit the block, and a Ctrl-C that arrives meanwhile waits (in the parent, for its own handler;
in a worker, to be dropped once ignored).

Workers take files in chunks (one task per file costs more than checking it), and a worker holds
on to its chunk: a Ctrl-C waited for every worker to finish its chunk, a second or more. So a
Ctrl-C also sets the run's stop event, and a worker leaves the rest of its chunk undone
(``stopping``): the run stops once the files being worked on are done.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_stop = None  # in a worker: the run's stop event (see pool)


def count(requested: int | None, files: int) -> int:
    """How many workers to start: as asked (default: one per core), but never more than there
    are cores (the work is CPU-bound; each worker costs tens of MB) or files to do."""
    cores = os.cpu_count() or 1
    return max(1, min(requested or cores, cores, files))


@contextlib.contextmanager
def pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A pool of ``workers`` processes. Left by an exception (Ctrl-C), it cancels the work that
    has not started and waits for what has: a file being fixed is written whole or not at all."""
    # Imported here: a run of a few files starts no pool, and these cost it a tenth of its start.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    stop = multiprocessing.get_context().Event()
    executor = ProcessPoolExecutor(max_workers=workers, initializer=_started_as_worker, initargs=(stop,))
    try:
        with _sigint_held():
            for _ in range(workers):  # starts them all now (one per task, or all at the first)
                executor.submit(os.getpid)
        yield executor
    except BaseException:
        stop.set()
        executor.shutdown(wait=True, cancel_futures=True)
        raise
    executor.shutdown(wait=True)


@contextlib.contextmanager
def _sigint_held() -> Iterator[None]:
    """SIGINT blocked in this thread (and the processes and threads it starts): held, not lost."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no signal masks, nor SIGINT to a group
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)  # a held Ctrl-C is raised here


def stopping() -> bool:
    """In a worker: whether the run was interrupted, and the rest of the chunk is to be left."""
    return _stop is not None and _stop.is_set()


def _started_as_worker(stop=None) -> None:
    global _stop
    _stop = stop
    # Ctrl-C reaches the whole process group; the parent alone decides what it stops. Ignoring
    # SIGINT drops one held since the fork (see pool); then it need no longer be blocked.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    import ctypes
    import multiprocessing

    parent = multiprocessing.parent_process()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if parent is not None:
        threading.Thread(target=_exit_after, args=(parent,), daemon=True, name="parent-watch").start()


def _exit_after(parent: multiprocessing.process.BaseProcess) -> None:
    parent.join()  # returns when the parent's end of the sentinel pipe closes: it has died
    os._exit(1)

