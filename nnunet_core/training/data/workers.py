"""Background batch production: worker processes, in-order delivery, bounded prefetch.

Batch ``t`` of the stream is ``make_batch(*position(t))``; worker ``w`` of ``W`` builds exactly
the batches ``t = w, w + W, ...`` and sends them through its own pipe (tensors as shared
memory), so the consumer reads them back in order by visiting the pipes round-robin and the
result does not depend on which worker ran first (``make_batch`` is a pure function of its
position). Each worker keeps at most ``ceil(prefetch / W)`` finished batches. A worker that
raises sends its traceback and stops; one that dies (e.g. the OOM killer), even halfway through
sending, is seen as end-of-file on its pipe (the consumer holds no write end). Either surfaces
as ``WorkerError`` instead of a hang.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import queue
import signal
import threading
import traceback
from collections.abc import Callable
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch

from nnunet_core.cluster import stop_signal
from nnunet_core.errors import NnunetCoreError

MakeBatch = Callable[[int, int], Any]
POLL_S = 0.5
JOIN_S = 5.0
Item = tuple[str, int, Any]  # ("ok" | "error", stream index, batch | message)


class WorkerError(NnunetCoreError):
    """A data worker failed; the message names the batch (and the case when known)."""


class Schedule:
    """Stream index ``t`` -> ``(epoch, iteration)``; a plain object so it pickles for spawn."""

    def __init__(self, start_epoch: int, iterations_per_epoch: int) -> None:
        self.start_epoch = start_epoch
        self.iterations_per_epoch = iterations_per_epoch

    def __call__(self, t: int) -> tuple[int, int]:
        return self.start_epoch + t // self.iterations_per_epoch, t % self.iterations_per_epoch


def limit_threads() -> None:
    """One numeric thread per worker: workers are the parallelism, threads would oversubscribe."""
    torch.set_num_threads(1)
    try:
        import blosc2

        blosc2.set_nthreads(1)
    except ImportError:  # pragma: no cover - blosc2 is a dependency
        pass


def _build(make_batch: MakeBatch, position: Callable[[int], tuple[int, int]], t: int) -> Item:
    try:
        return ("ok", t, make_batch(*position(t)))
    except BaseException as exc:  # report everything, including SystemExit from a bug
        return ("error", t, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")


def _put(target: queue.Queue, item: Item, stop: Any) -> bool:
    """Blocking put that gives up when ``stop`` is set."""
    while not stop.is_set():
        try:
            target.put(item, timeout=POLL_S)
            return True
        except queue.Full:
            continue
    return False


def _send(writer: Any, item: Item) -> None:
    """Tensors travel as shared memory (torch's reductions): only a handle goes through the pipe.

    A 24 MB batch through the pipe itself costs the consumer tens of ms of copying; through
    shared memory the worker pays one copy and the consumer maps it.
    """
    writer.send_bytes(ForkingPickler.dumps(item))


def _recv(reader: Any) -> Item:
    # Bytes from our own forked worker over a private pipe (what multiprocessing itself does);
    # files on disk (checkpoints, cases, properties) are never unpickled.
    return pickle.loads(reader.recv_bytes())


def _send_loop(pending: queue.Queue, writer: Any) -> None:
    while True:
        item = pending.get()
        try:
            _send(writer, item)
        except (OSError, ValueError):
            return  # the consumer closed its end: we are being stopped
        if item[0] == "error":
            return


class _Stopped:
    """The consumer's stop event, also set in effect when the consumer process is gone."""

    def __init__(self, event: Any, parent: int) -> None:
        self.event, self.parent = event, parent

    def is_set(self) -> bool:
        return self.event.is_set() or os.getppid() != self.parent


def _worker_main(
    make_batch: MakeBatch,
    position: Callable[[int], tuple[int, int]],
    first: int,
    step: int,
    writer: Any,
    stop: Any,
    depth: int,
    parent: int,
) -> None:
    # Ctrl-C and the stop signal are the trainer's business; it stops the workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop_signal.for_data_worker()
    limit_threads()
    stopped = _Stopped(stop, parent)
    pending: queue.Queue = queue.Queue(maxsize=depth)
    sender = threading.Thread(target=_send_loop, args=(pending, writer), daemon=True)
    sender.start()
    t = first
    while not stopped.is_set() and sender.is_alive():
        item = _build(make_batch, position, t)
        if not _put(pending, item, stopped) or item[0] == "error":
            break
        t += step
    # After an error, stay until stopped: the batches sent before it live in this process's
    # shared memory until the consumer has mapped them.
    while not stopped.is_set():
        stop.wait(POLL_S)


class BatchStream:
    """An endless, ordered stream of batches ``(epoch, iteration)`` from ``start_epoch`` on.

    ``num_workers`` 0 builds batches in a background thread of this process (``prefetch``
    ahead, default 1); otherwise forked processes do (default ``prefetch`` max(6, workers), as
    upstream's ``num_cached``). Use as a context manager or call ``close()``.
    """

    def __init__(
        self,
        make_batch: MakeBatch,
        num_workers: int,
        prefetch: int | None = None,
        *,
        iterations_per_epoch: int,
        start_epoch: int = 0,
    ) -> None:
        if iterations_per_epoch < 1 or num_workers < 0 or start_epoch < 0:
            msg = (
                "BatchStream needs iterations_per_epoch >= 1, num_workers >= 0, start_epoch >= 0;"
                f" got {iterations_per_epoch}, {num_workers}, {start_epoch}"
            )
            raise WorkerError(msg)
        self.make_batch = make_batch
        self.num_workers = int(num_workers)
        self.iterations_per_epoch = int(iterations_per_epoch)
        self.start_epoch = int(start_epoch)
        self.position = Schedule(self.start_epoch, self.iterations_per_epoch)
        default = max(6, self.num_workers) if self.num_workers else 1
        self.prefetch = max(1, int(prefetch if prefetch is not None else default))
        self._next = 0
        self._closed = False
        self._processes: list[Any] = []
        self._readers: list[Any] = []
        self._thread: threading.Thread | None = None
        if self.num_workers == 0:
            self._start_thread()
        else:
            self._start_processes()

    @property
    def next_position(self) -> tuple[int, int]:
        """``(epoch, iteration)`` the next ``next()`` returns."""
        return self.position(self._next)

    def _start_thread(self) -> None:
        self._stop: Any = threading.Event()
        self._queue: queue.Queue = queue.Queue(maxsize=self.prefetch)
        self._thread = threading.Thread(
            target=self._thread_main, name="batch-prefetch", daemon=True
        )
        self._thread.start()

    def _thread_main(self) -> None:
        t = 0
        while not self._stop.is_set():
            item = _build(self.make_batch, self.position, t)
            if not _put(self._queue, item, self._stop) or item[0] == "error":
                return
            t += 1

    def _start_processes(self) -> None:
        methods = mp.get_all_start_methods()
        context = mp.get_context("fork" if "fork" in methods else "spawn")
        self._stop = context.Event()
        depth = max(1, -(-self.prefetch // self.num_workers))
        for w in range(self.num_workers):
            reader, writer = context.Pipe(duplex=False)
            process = context.Process(
                target=_worker_main,
                args=(
                    self.make_batch,
                    self.position,
                    w,
                    self.num_workers,
                    writer,
                    self._stop,
                    depth,
                    os.getpid(),
                ),
                name=f"nnunet-data-{w}",
                daemon=True,
            )
            process.start()
            writer.close()  # the worker holds the only write end: its death reads as EOF
            self._readers.append(reader)
            self._processes.append(process)

    def __iter__(self) -> BatchStream:
        return self

    def __next__(self) -> Any:
        if self._closed:
            msg = "BatchStream is closed"
            raise WorkerError(msg)
        t = self._next
        w = t % self.num_workers if self.num_workers else 0
        kind, got, payload = self._receive_thread(t) if self._thread else self._receive(w, t)
        if kind == "error":
            self.close()
            epoch, iteration = self.position(got)
            msg = f"data worker {w} failed on epoch {epoch} iteration {iteration}: {payload}"
            raise WorkerError(msg)
        if got != t:  # cannot happen unless the protocol is broken; never deliver out of order
            self.close()
            msg = f"data worker {w} delivered batch {got}, expected {t}"
            raise WorkerError(msg)
        self._next += 1
        return payload

    def _receive_thread(self, t: int) -> Item:
        while True:
            try:
                return self._queue.get(timeout=POLL_S)
            except queue.Empty:
                if self._thread is not None and not self._thread.is_alive() and self._queue.empty():
                    self._died(0, t, None)

    def _receive(self, w: int, t: int) -> Item:
        reader, process = self._readers[w], self._processes[w]
        while True:
            if reader.poll(POLL_S):
                try:
                    return _recv(reader)
                except (EOFError, OSError):  # died mid-message, or before its memory was mapped
                    process.join(JOIN_S)
                    self._died(w, t, process.exitcode)
            if not process.is_alive() and not reader.poll(0):
                self._died(w, t, process.exitcode)

    def _died(self, w: int, t: int, code: int | None) -> None:
        self.close()
        epoch, iteration = self.position(t)
        msg = (
            f"data worker {w} died (exit code {code}) "
            f"while building epoch {epoch} iteration {iteration}"
        )
        raise WorkerError(msg)

    def close(self) -> None:
        """Stop and reap every worker (idempotent); unread batches are dropped."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join(JOIN_S)
            return
        for reader in self._readers:
            reader.close()  # a sender blocked on a full pipe gets EPIPE and ends
        for process in self._processes:
            process.join(JOIN_S)
            if process.is_alive():
                process.terminate()
                process.join(JOIN_S)
            if process.is_alive():  # pragma: no cover - only a process stuck in the kernel
                process.kill()
                process.join()

    def __enter__(self) -> BatchStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if hasattr(self, "_stop"):
                self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass
