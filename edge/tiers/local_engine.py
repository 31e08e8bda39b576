"""Batched generation in the edge model's process: onnxruntime-genai's ``Engine``
(``LOCAL__BATCHING=engine``, issue 34).

Concurrent requests share decode steps. On the CPU the engine batches statically (up to
``LOCAL__MAX_CONCURRENCY`` rows; continuous batching needs paged attention, which 0.18
builds only for CUDA and WebGPU), so a request that arrives while a batch runs waits for
it. Measured (``bench.edge_model``, docs/models.md): 1.08-1.42x the one-generation-per-slot
tier's tokens/s at 8 streams, slower alone. Its greedy answers are those of one generation
alone (checked on 8 prompts x 64 tokens). On the CPU, ``steps`` (``edge.tiers.local_batch``)
batches continuously and is the default there; ``auto`` picks this mode on other providers,
where the engine batches dynamically.

The engine accepts calls only from the thread that created it, so one owner thread admits
requests, runs steps while any are pending and cancels turns; the worker's main loop hands
it messages through a queue. It speaks the worker's protocol (``edge.tiers.local_worker``):
``prompt``, ``piece`` ..., then ``done`` or ``error``. Stop strings are matched here, as
the engine takes them only with dynamic batching; a hit or a ``stop`` cancels the turn,
and the turn's end (``TURN_FINISHED``, which follows a cancel too) sends ``done``.
"""

from __future__ import annotations

import functools
import os
import queue
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from edge.tiers.local_worker import Job, OwnedLoop, StopScan, answer_budget, prompt_tokens

Send = Callable[[int, str, Any], None]


@dataclass
class _Turn:
    rid: int
    request: Any
    turn_id: int
    limit: int
    decoder: Any
    scan: StopScan
    count: int = 0
    finish: str | None = None  # set when a stop string ended it
    stopped: bool = False  # the edge asked it to stop (its client left)


class EngineRunner(OwnedLoop):
    """``og.Engine`` on its owner thread; ``submit`` and ``stop`` may be called from any."""

    thread_name = "edge-engine"

    def __init__(self, model: Any, tokenizer: Any, context_tokens: int, send: Send) -> None:
        self._model, self._tokenizer = model, tokenizer
        self._context_tokens = context_tokens
        self._send = send
        self._start()  # close(): every running turn is cancelled

    def _run(self) -> None:
        import onnxruntime_genai as og

        engine = og.Engine(self._model)
        events = engine.create_event_buffer(256)
        turns: dict[int, _Turn] = {}  # by rid
        by_request: dict[int, _Turn] = {}  # by id(request): events name their request
        token, finished = int(og.EngineEventFlags.TOKEN), int(og.EngineEventFlags.TURN_FINISHED)
        failed = int(og.EngineEventFlags.FAILED)
        while True:
            try:  # take everything that has arrived before the next step
                message = self._inbox.get(block=not engine.has_pending_requests())
            except queue.Empty:
                message = ("step", -1, None)
            if message is None:
                for running in turns.values():
                    running.request.cancel_turn(running.turn_id)
                return
            kind, rid, job = message
            if kind == "generate" and job is not None:
                try:
                    admitted = self._admit(engine, og, rid, job)
                except Exception as exc:  # this request fails, the engine goes on
                    self._send(rid, "error", ("failed", f"{type(exc).__name__}: {exc}"))
                    continue
                if admitted is not None:
                    turns[rid] = by_request[id(admitted.request)] = admitted
                continue
            if kind == "stop":
                if (leaving := turns.get(rid)) is not None and not leaving.stopped:
                    leaving.stopped = True
                    leaving.request.cancel_turn(leaving.turn_id)
                continue
            try:
                ran = engine.run(events) or []
            except Exception as exc:  # a failed step fails the turns in it
                if not turns:  # twice in a row: the engine is broken; the edge restarts us
                    os._exit(70)
                for lost in list(turns.values()):
                    self._send(lost.rid, "error", ("failed", f"{type(exc).__name__}: {exc}"))
                    lost.request.cancel_turn(lost.turn_id)
                turns.clear()
                by_request.clear()
                continue
            for event in ran:
                turn = by_request.get(id(event.request))
                if turn is None:
                    continue
                flags = int(event.flags)
                if flags & token and turn.finish is None and not turn.stopped:
                    self._token(turn, int(event.token))
                if flags & (finished | failed):
                    del turns[turn.rid], by_request[id(turn.request)]
                    if flags & failed:
                        self._send(turn.rid, "error", ("failed", f"engine: {event.error_code}"))
                    else:
                        if turn.finish is None and not turn.stopped and (held := turn.scan.flush()):
                            self._send(turn.rid, "piece", held)  # not a stop string after all
                        finish = turn.finish or ("stop" if turn.count < turn.limit else "length")
                        self._send(turn.rid, "done", (turn.count, finish, turn.stopped))
                    turn.request.close()

    def _admit(self, engine: Any, og: Any, rid: int, job: Job) -> _Turn | None:
        import numpy as np

        tokens = prompt_tokens(self._tokenizer, job)
        emit = functools.partial(self._send, rid)
        if (limit := answer_budget(len(tokens), job, self._context_tokens, emit)) is None:
            return None
        request = engine.create_request()
        options = og.TurnOptions(request)
        options.set_max_generated_tokens(limit)
        options.set_repetition_penalty(job.repetition_penalty)
        options.set_do_sample(job.temperature > 0)
        if job.temperature > 0:
            options.set_temperature(job.temperature)
            options.set_top_p(job.top_p)
            if job.top_k:
                options.set_top_k(job.top_k)
        turn_id = request.begin_turn(np.asarray(tokens, dtype=np.int32), options)
        decoder = self._tokenizer.create_stream()
        return _Turn(rid, request, turn_id, limit, decoder, StopScan(job.stops))

    def _token(self, turn: _Turn, token: int) -> None:
        turn.count += 1
        piece = turn.decoder.decode(token)
        if not piece:
            return
        text, hit = turn.scan.feed(piece)
        if text:
            self._send(turn.rid, "piece", text)
        if hit:  # the rest is cut: the turn ends, and its end sends "done"
            turn.finish = "stop"
            turn.request.cancel_turn(turn.turn_id)
