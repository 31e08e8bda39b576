"""Continuous batching of the edge model on the CPU (``LOCAL__BATCHING=steps``, issue 34).

onnxruntime-genai 0.18 batches on the CPU only statically (``og.Engine``: a request that
arrives while a batch runs waits for the whole batch), and a padded static batch of
``og.Generator`` changes greedy answers (docs/models.md). This runner drives the decoder
graph that the model builder wrote (``model.onnx``: ``GroupQueryAttention`` layers with
the key/value cache as inputs and outputs) with onnxruntime itself:

- a new request's prompt is prefilled alone (a batch of one), and its cache copied into
  a free row of one buffer per layer: it joins the running batch at the next step;
- every decode step runs all rows at once. Each row's ``attention_mask`` holds its own
  length, so ``GroupQueryAttention`` writes each row's new key and value at that row's
  position and rotates by it (``seqlens_k``): rows of different lengths need no padding,
  and a row answers as it would alone;
- the buffers are bound as both the cache input and the cache output (``io_binding``), so
  a step copies no cache; a finished row's place is taken by the last row.

It speaks the worker's protocol (``edge.tiers.local_worker``): ``prompt``, ``piece`` ...,
then ``done`` or ``error``. Sampling, seeds, the repetition penalty and stop strings are
applied here, per row (``edge.tiers.sampling``).
"""

from __future__ import annotations

import functools
import queue
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge.tiers.kv_rows import Graph, Rows
from edge.tiers.local_worker import Job, OwnedLoop, StopScan, answer_budget, prompt_tokens
from edge.tiers.sampling import Sampler

Send = Callable[[int, str, Any], None]


def template_head(tokenizer: Any) -> np.ndarray:
    """The tokens every chat prompt starts with: the chat template's part before the first
    user message (its system turn), as the common start of two different chats."""
    try:
        a, b = (
            np.asarray(prompt_tokens(tokenizer, Job([{"role": "user", "content": text}],
                                                    None, 1, 0.0, 1.0, None, None, 1.0)))
            for text in ("a", "b")
        )  # fmt: skip
    except Exception:  # a tokenizer without a chat template: no head
        return np.zeros(0, np.int64)
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return np.asarray(a[: int(differ[0]) if differ.size else n], np.int64)


@dataclass
class _Row:
    rid: int
    limit: int
    decoder: Any
    scan: StopScan
    sampler: Sampler
    token: int = 0  # the last token chosen: the row's next input
    count: int = 0
    finish: str | None = None  # set when the row has ended: "stop" or "length"
    cut: bool = False  # a stop string ended it: nothing held is sent
    stopped: bool = False  # the edge asked it to stop (its client left)


class StepRunner(OwnedLoop):
    """The decode loop on its own thread; ``submit`` and ``stop`` may be called from any."""

    thread_name = "edge-steps"
    seeds = True  # each row samples from its own seeded generator

    def __init__(
        self,
        model_dir: str,
        tokenizer: Any,
        *,
        threads: int,
        max_rows: int,
        context_tokens: int,
        send: Send,
    ) -> None:
        import onnxruntime as ort

        self.graph = Graph.load(model_dir)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(
            str(Path(model_dir) / self.graph.filename), options, providers=["CPUExecutionProvider"]
        )
        kinds = {i.name: i.type for i in self._session.get_inputs()}
        self._dtype = np.float16 if kinds[self.graph.past[0]] == "tensor(float16)" else np.float32
        self._tokenizer = tokenizer
        self._max_rows = max_rows
        self._context_tokens = context_tokens
        self._send = send
        self._head = template_head(tokenizer)
        self._head_cache: list[np.ndarray] = []  # computed at its first use
        self._bound: tuple[tuple[int, int], Any] | None = None  # (rows, capacity), binding
        self._start()  # close(): every running request ends (done, stopped)

    def _run(self) -> None:
        cache = Rows(self.graph, self._max_rows, 256, self._dtype, self._context_tokens)
        rows: list[_Row] = []  # index i is the cache's row i
        waiting: list[tuple[int, Job]] = []
        while self._take(rows, waiting):
            while waiting and cache.n < self._max_rows:  # they join the batch at this step
                rid, job = waiting.pop(0)
                try:
                    admitted = self._admit(cache, rid, job)
                except Exception as exc:  # this request fails, the batch goes on
                    self._send(rid, "error", ("failed", f"{type(exc).__name__}: {exc}"))
                    continue
                if admitted is not None:
                    rows.append(admitted)
            self._retire(cache, rows)
            if not rows:
                continue
            try:
                logits = self._step(cache, [r.token for r in rows])
                for i, row in enumerate(rows):
                    self._chose(row, row.sampler.choose(logits[i]))
            except Exception as exc:  # a failed step fails the rows in it
                for lost in rows:
                    self._send(lost.rid, "error", ("failed", f"{type(exc).__name__}: {exc}"))
                rows.clear()
                cache.lengths.clear()
                continue
            self._retire(cache, rows)

    def _take(self, rows: list[_Row], waiting: list[tuple[int, Job]]) -> bool:
        """Take the messages that have arrived (wait for one only when nothing runs):
        new requests join ``waiting``, a stop marks its row. False: close."""
        block = not rows and not waiting
        while True:
            try:
                message = self._inbox.get(block=block)
            except queue.Empty:
                return True
            block = False
            if message is None:
                for row in rows:
                    self._send(row.rid, "done", (row.count, "stop", True))
                for rid, _ in waiting:
                    self._send(rid, "done", (0, "stop", True))
                return False
            kind, rid, job = message
            if kind == "generate" and job is not None:
                waiting.append((rid, job))
            elif kind == "stop":
                if any(r == rid for r, _ in waiting):  # it never started
                    waiting[:] = [(r, j) for r, j in waiting if r != rid]
                    self._send(rid, "done", (0, "stop", True))
                for row in rows:
                    row.stopped |= row.rid == rid

    def _admit(self, cache: Rows, rid: int, job: Job) -> _Row | None:
        tokens = np.asarray(prompt_tokens(self._tokenizer, job), dtype=np.int64)
        emit = functools.partial(self._send, rid)
        if (limit := answer_budget(len(tokens), job, self._context_tokens, emit)) is None:
            return None
        logits, prefilled = self._prefill(tokens)
        row = _Row(
            rid, limit, self._tokenizer.create_stream(), StopScan(job.stops),
            Sampler.of(job, tokens),
        )  # fmt: skip
        self._chose(row, row.sampler.choose(logits))
        cache.add(prefilled)  # last: a request that failed above holds no row
        return row

    def _prefill(self, tokens: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """A prompt alone: its last position's logits and its cache (a batch of one).

        The chat template's head (its system turn, the same for every chat) is computed
        once; a prompt that starts with it runs only the rest, on that cache. Every such
        prompt is split there and nowhere else, so its numbers do not depend on what ran
        before it (a seeded sample stays the same)."""
        head = len(self._head)
        past: list[np.ndarray] | None = None
        if head and len(tokens) > head and np.array_equal(tokens[:head], self._head):
            if not self._head_cache:
                self._head_cache = self._run_prompt(self._head, None)[1]
            past = self._head_cache
        else:
            head = 0
        return self._run_prompt(tokens[head:], past)

    def _run_prompt(
        self, tokens: np.ndarray, past: list[np.ndarray] | None
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        g = self.graph
        if past is None:
            empty = np.zeros((1, g.kv_heads, 0, g.head_size), self._dtype)
            past = [empty] * len(g.past)
        feeds: dict[str, np.ndarray] = dict(zip(g.past, past, strict=True))
        feeds[g.input_ids] = tokens[None, :]
        feeds[g.attention_mask] = np.ones((1, past[0].shape[2] + len(tokens)), np.int64)
        out = self._session.run([g.logits, *g.present], feeds)
        return np.asarray(out[0])[0, -1], [np.asarray(o) for o in out[1:]]

    def _step(self, cache: Rows, tokens: list[int]) -> np.ndarray:
        """One decode step for every row: each row's next-token logits."""
        g, n = self.graph, cache.n
        cache.reserve(max(cache.lengths) + 1)
        binding = self._binding(cache)
        binding.bind_cpu_input(g.input_ids, np.asarray(tokens, np.int64).reshape(n, 1))
        binding.bind_cpu_input(g.attention_mask, cache.mask())
        self._session.run_with_iobinding(binding)
        for i in range(n):
            cache.lengths[i] += 1
        logits: np.ndarray = binding.get_outputs()[0].numpy()
        return logits[:, -1]

    def _binding(self, cache: Rows) -> Any:
        """The step's binding: the cache buffers' first ``n`` rows, as both the cache input
        and the cache output (``GroupQueryAttention`` appends in place, so a step copies no
        cache). Kept while the rows and the buffers stay the same."""
        import onnxruntime as ort

        key = (cache.n, cache.capacity)  # the buffers change only when the capacity does
        if self._bound is not None and self._bound[0] == key:
            return self._bound[1]
        binding = self._session.io_binding()
        binding.bind_output(self.graph.logits, "cpu")  # first: outputs come back in order
        for buffer, past, present in zip(cache.buffers, self.graph.past, self.graph.present,
                                         strict=True):  # fmt: skip
            value = ort.OrtValue.ortvalue_from_numpy(buffer[: cache.n])
            binding.bind_ortvalue_input(past, value)
            binding.bind_ortvalue_output(present, value)
        self._bound = (key, binding)
        return binding

    def _chose(self, row: _Row, token: int) -> None:
        """A row's new token: its text is sent, or the row ends (end of sequence, a stop
        string, its limit)."""
        row.token = token
        if row.stopped or row.finish is not None:
            return
        if token in self.graph.eos:
            row.finish = "stop"
            return
        row.count += 1
        piece = row.decoder.decode(token)
        if piece:
            text, hit = row.scan.feed(piece)
            if text:
                self._send(row.rid, "piece", text)
            if hit:
                row.finish, row.cut = "stop", True
                return
        if row.count >= row.limit:
            row.finish = "length"

    def _retire(self, cache: Rows, rows: list[_Row]) -> None:
        """End the rows that are done or stopped; the last row takes each freed place."""
        i = 0
        while i < len(rows):
            row = rows[i]
            if not row.stopped and row.finish is None:
                i += 1
                continue
            if row.stopped:
                self._send(row.rid, "done", (row.count, "stop", True))
            else:
                if not row.cut and (held := row.scan.flush()):
                    self._send(row.rid, "piece", held)  # not a stop string after all
                self._send(row.rid, "done", (row.count, row.finish, False))
            cache.remove(i)
            last = rows.pop()
            if i < len(rows):
                rows[i] = last
