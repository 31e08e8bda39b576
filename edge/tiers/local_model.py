"""The edge's small model on onnxruntime-genai (by default SmolLM2-135M-Instruct, INT8).

The model runs in its own process (``edge.tiers.local_worker``: onnxruntime-genai holds the
GIL for a whole decode step, which stalled the edge's event loop when it ran on a thread
here); text pieces reach the event loop through a pipe and a reader thread. A bounded
number of generations run at once (``LOCAL__MAX_CONCURRENCY``). On the CPU they share
decode steps by default (``LOCAL__BATCHING=steps``: continuous batching,
``edge.tiers.local_batch``); ``engine`` uses onnxruntime-genai's ``Engine``
(``edge.tiers.local_engine``) and ``off`` gives each its own generator. Waiting for a slot
has a deadline, and a cancelled request stops at the next token.

The model folder says what the model is: its chat template and stop tokens (read by the
runtime from ``genai_config.json`` and the tokenizer files) and its context window
(``model.context_length``, capped by ``LOCAL__CONTEXT_TOKENS``). The execution provider is
``LOCAL__PROVIDER``: one this build of onnxruntime-genai lacks fails at start, by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import multiprocessing
import threading
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import onnxruntime_genai as og

from edge.tiers.local_worker import Job, Options, serve
from edge.tiers.slots import EdgeBusy, Slots
from shared.schemas import ChatCompletionRequest

log = logging.getLogger("edgecore.edge")

__all__ = [
    "EdgeBusy", "Generation", "LocalModel", "ModelProcessDied", "PromptTooLong",
    "ProviderUnavailable", "batching_mode", "check_provider", "context_length", "folder_meta",
    "served_name",
]  # fmt: skip


# The providers onnxruntime-genai can run a model on, and how to ask this build for each.
PROVIDERS: dict[str, Callable[[], bool]] = {
    "cpu": lambda: True,
    "cuda": og.is_cuda_available,
    "dml": og.is_dml_available,
    "openvino": og.is_openvino_available,
    "qnn": og.is_qnn_available,
    "webgpu": og.is_webgpu_available,
}


def folder_meta(model_dir: Path) -> dict[str, Any]:
    """What ``edgecore models prepare`` wrote about the model (``edgecore.json``), or {}."""
    with contextlib.suppress(OSError, ValueError):
        meta = json.loads((model_dir / "edgecore.json").read_text())
        if isinstance(meta, dict):
            return meta
    return {}


def served_name(model_dir: Path) -> str:
    """The name clients ask for: the folder's own, else ``edge-<folder name>``."""
    return str(folder_meta(model_dir).get("served_model_name") or f"edge-{model_dir.name}")


class ProviderUnavailable(RuntimeError):
    """The configured execution provider is unknown, or missing from this build."""


def check_provider(provider: str) -> None:
    available = PROVIDERS.get(provider)
    if available is None:
        raise ProviderUnavailable(
            f"LOCAL__PROVIDER={provider!r} is not an onnxruntime-genai execution provider; "
            f"use one of {', '.join(PROVIDERS)}"
        )
    if not available():
        raise ProviderUnavailable(
            f"LOCAL__PROVIDER={provider!r}: this onnxruntime-genai build cannot run on "
            f"{provider} (install its {provider} build, e.g. onnxruntime-genai-cuda, or use cpu)"
        )


def batching_mode(batching: str, provider: str) -> str:
    """The batching the model process runs: ``auto`` is ``steps`` on the CPU (continuous,
    ``edge.tiers.local_batch``) and ``engine`` elsewhere. ``steps`` runs only on the CPU."""
    if batching == "auto":
        return "steps" if provider == "cpu" else "engine"
    if batching == "steps" and provider != "cpu":
        raise ProviderUnavailable(
            f"LOCAL__BATCHING=steps batches on the CPU only; with LOCAL__PROVIDER={provider!r} "
            "use engine, off or auto"
        )
    return batching


def context_length(model_dir: Path) -> int | None:
    """The model's own context window, from its genai_config.json."""
    try:
        config = json.loads((model_dir / "genai_config.json").read_text())
        return int(config["model"]["context_length"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


class PromptTooLong(Exception):
    def __init__(self, tokens: int, limit: int) -> None:
        super().__init__(f"prompt has {tokens} tokens; the edge model's window is {limit}")
        self.tokens = tokens
        self.limit = limit


@dataclass
class Generation:
    """Filled in while tokens stream; read after the stream ends."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"


class ModelProcessDied(RuntimeError):
    """The edge model's process ended while the edge still needed it."""


def _stop(conn: Connection, process: BaseProcess, lock: threading.Lock | None = None) -> None:
    """Ask a model process to end (it finishes at its next token), kill it if it won't."""
    with contextlib.suppress(OSError, ValueError), lock or contextlib.nullcontext():
        conn.send(("close",))
    process.join(10)
    if process.is_alive():
        process.kill()
        process.join(5)
    conn.close()


class LocalModel:
    """The edge's client of its model process (``edge.tiers.local_worker``).

    ``stream`` takes a slot (the queue deadline, the ``waiting``/``running`` figures), sends
    the request to the worker and yields the pieces it sends back; closing the stream early
    tells the worker to stop at its next token, and the slot is given back once it has.
    """

    def __init__(
        self,
        model_dir: Path,
        *,
        threads: int,
        max_concurrency: int,
        queue_timeout_s: float,
        context_tokens: int,
        max_new_tokens: int,
        repetition_penalty: float | None = None,
        provider: str = "cpu",
        start_timeout_s: float = 300.0,
        restart_backoff_s: float = 1.0,
        batching: str = "auto",
    ) -> None:
        check_provider(provider)  # before loading: a wrong provider fails by name, at once
        batching = batching_mode(batching, provider)
        window = context_length(model_dir)
        self.context_tokens = min(context_tokens, window) if window else context_tokens
        self.max_new_tokens = max_new_tokens
        # The model's own default (a model that loops without one says so in its folder).
        default = folder_meta(model_dir).get("repetition_penalty", 1.0)
        self.repetition_penalty = float(repetition_penalty or default)
        self.slots = Slots(max_concurrency, queue_timeout_s)
        self.cancelled = 0  # generations stopped early because nobody was listening
        self.restarts = 0  # model processes started again after one died
        self._model_dir = model_dir
        self._options = Options(
            str(model_dir), threads, provider, max_concurrency, self.context_tokens, batching
        )
        self._start_timeout_s = start_timeout_s
        self._restart_backoff_s = restart_backoff_s
        self._send_lock = threading.Lock()
        self._streams: dict[int, asyncio.Queue[tuple[str, Any]]] = {}
        self._ids = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._died = False
        self._closing = False
        self._restarting: asyncio.Task[None] | None = None
        self._conn, self._process = self._spawn()

    def _spawn(self) -> tuple[Connection, BaseProcess]:
        """Start a model process and wait until it has loaded the model (blocking)."""
        # spawn, not fork: the edge has threads (fork would copy their locks mid-use).
        ctx = multiprocessing.get_context("spawn")
        conn, child = ctx.Pipe()
        process = ctx.Process(
            target=serve, args=(child, self._options), name="edgecore-edge-model", daemon=True
        )
        process.start()
        child.close()  # ours is closed in the child: its reads end when we go
        if not conn.poll(self._start_timeout_s):
            _stop(conn, process)
            raise ModelProcessDied(f"the edge model did not load within {self._start_timeout_s:g}s")
        try:
            kind, detail = conn.recv()
        except EOFError:  # it died while loading (a crash in the runtime, out of memory)
            process.join(5)
            kind, detail = "failed", f"its process exited with {process.exitcode}"
        if kind != "ready":
            _stop(conn, process)
            raise ModelProcessDied(
                f"the edge model failed to load from {self._model_dir}: {detail}"
            )
        return conn, process

    def close(self) -> None:
        self._closing = True  # a restart under way stops the process it started
        _stop(self._conn, self._process, self._send_lock)

    @property
    def alive(self) -> bool:
        """False once the model process has ended (its pipe closed)."""
        return not self._died

    @property
    def pid(self) -> int | None:
        """The model process's id."""
        return self._process.pid

    @property
    def waiting(self) -> int:
        return self.slots.waiting

    @property
    def running(self) -> int:
        return self.slots.running

    def _job(self, req: ChatCompletionRequest, raw_prompt: str | None) -> Job:
        extra = req.model_extra or {}  # vLLM's extensions the edge honours too
        top_k = extra.get("top_k")
        return Job(
            messages=[] if raw_prompt is not None
            else [{"role": m.role, "content": m.text()} for m in req.messages],
            raw_prompt=raw_prompt,
            max_tokens=min(req.output_limit or self.max_new_tokens, self.max_new_tokens),
            temperature=1.0 if req.temperature is None else req.temperature,
            top_p=req.top_p or 1.0,
            top_k=top_k if isinstance(top_k, int) and top_k > 0 else None,
            seed=req.seed,
            repetition_penalty=float(extra.get("repetition_penalty") or self.repetition_penalty),
            stops=[req.stop] if isinstance(req.stop, str) else list(req.stop or []),
        )  # fmt: skip

    async def stream(
        self, req: ChatCompletionRequest, gen: Generation, raw_prompt: str | None = None
    ) -> AsyncGenerator[str, None]:
        """Yield text deltas; ``gen`` holds token counts and finish reason at the end.

        ``raw_prompt``: continue this text (``/v1/completions``) instead of the chat."""
        async with self.slots.slot():
            rid, queue = self._open()
            try:
                self._send(("generate", rid, self._job(req, raw_prompt)))
            except (OSError, ValueError):  # the pipe is broken: the process has ended
                self._streams.pop(rid, None)
                raise ModelProcessDied("the edge model's process has ended") from None
            ended = False
            try:
                while True:
                    kind, value = await queue.get()
                    if kind == "piece":
                        yield value
                    elif kind == "prompt":
                        gen.prompt_tokens = value
                    else:
                        ended = True
                        self._finish(gen, kind, value)
                        return
            finally:
                if not ended:
                    # Client gone or stream closed: the worker stops at its next token, and
                    # the slot is free once it has (shielded: this often runs in a cancel).
                    with contextlib.suppress(OSError, ValueError):
                        self._send(("stop", rid))
                    await asyncio.shield(self._drain(queue, gen))
                self._streams.pop(rid, None)

    def _finish(self, gen: Generation, kind: str, value: Any) -> None:
        if kind == "done":
            gen.completion_tokens, gen.finish_reason, stopped = value
            self.cancelled += bool(stopped)
            return
        what, detail = value
        if what == "prompt_too_long":
            raise PromptTooLong(*detail)
        if what == "died":
            raise ModelProcessDied(detail)
        raise RuntimeError(f"the edge model failed: {detail}")

    async def _drain(self, queue: asyncio.Queue[tuple[str, Any]], gen: Generation) -> None:
        while True:
            kind, value = await queue.get()
            if kind in ("done", "error"):
                with contextlib.suppress(Exception):
                    self._finish(gen, kind, value)
                return

    def _open(self) -> tuple[int, asyncio.Queue[tuple[str, Any]]]:
        if self._loop is None:  # the reader delivers onto the loop that serves the streams
            self._loop = asyncio.get_running_loop()
            self._start_reader(self._conn)
        if self._died:
            raise ModelProcessDied("the edge model's process has ended")
        rid = next(self._ids)
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._streams[rid] = queue
        return rid, queue

    def _send(self, message: tuple[Any, ...]) -> None:
        with self._send_lock:  # close() sends from another thread
            self._conn.send(message)

    def _start_reader(self, conn: Connection) -> None:
        reader = threading.Thread(
            target=self._read, args=(conn,), name="edge-model-reader", daemon=True
        )
        reader.start()

    def _read(self, conn: Connection) -> None:
        """The reader thread: each message from the worker onto the event loop."""
        assert self._loop is not None
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break
            try:
                self._loop.call_soon_threadsafe(self._deliver, message)
            except RuntimeError:  # the loop is closed: the edge is stopping
                return
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._ended, conn)

    def _deliver(self, message: tuple[Any, ...]) -> None:
        rid, kind, value = message
        queue = self._streams.get(rid)
        if queue is not None:
            queue.put_nowait((kind, value))

    def _ended(self, conn: Connection) -> None:
        """The worker is gone: every open stream fails, and so does every later one until
        a new process has loaded the model (``restart_backoff_s`` 0: never)."""
        if conn is not self._conn:  # an earlier process's reader
            return
        self._died = True
        for queue in self._streams.values():
            queue.put_nowait(("error", ("died", "the edge model's process ended")))
        if not self._closing and self._restart_backoff_s > 0 and self._restarting is None:
            self._restarting = asyncio.get_running_loop().create_task(self._restart())

    async def _restart(self) -> None:
        """Start a new model process, with a doubling wait between failed tries (a model
        that cannot load keeps failing, and each try costs a load's CPU and memory)."""
        delay = self._restart_backoff_s
        try:
            while not self._closing:
                log.warning("the edge model's process ended (exit %s); restarting in %.1fs",
                            self._process.exitcode, delay)  # fmt: skip
                await asyncio.sleep(delay)
                await asyncio.to_thread(self._process.join, 5)
                try:
                    conn, process = await asyncio.to_thread(self._spawn)
                except ModelProcessDied as exc:
                    log.error("restarting the edge model failed: %s", exc)
                    delay = min(delay * 2, 60.0)
                    continue
                if self._closing:
                    _stop(conn, process)
                    return
                with self._send_lock:
                    old = self._conn
                    self._conn, self._process = conn, process
                old.close()
                self.restarts += 1
                self._died = False
                self._start_reader(conn)
                log.warning("the edge model's process is back (pid %s)", process.pid)
                return
        finally:
            self._restarting = None
