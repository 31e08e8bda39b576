"""The edge model's own process: where onnxruntime-genai runs, away from the event loop.

onnxruntime-genai 0.18 holds the GIL for a whole decode step (and a whole prefill) inside
``Generator.generate_next_token``. On a thread of the edge's process that stalled the event
loop, and every cache hit and forwarded stream with it, by 130-330 ms at p99 while the model
worked (``bench.edge_model_runtime``). Here the model lives in a child process; the edge
sends it requests over a pipe and receives text pieces back.

The protocol (pickled tuples over one ``multiprocessing`` pipe):

- to the worker: ``("generate", rid, Job)``, ``("stop", rid)``, ``("close",)``;
- from it: ``("ready", None)`` or ``("failed", message)`` once at start, then per request
  ``(rid, "prompt", n)``, ``(rid, "piece", text)`` ..., and last ``(rid, "done",
  (completion_tokens, finish_reason, stopped))`` or ``(rid, "error", (kind, detail))``.

The worker exits when the edge closes the pipe or dies (its read ends): nothing outlives
the edge.
"""

from __future__ import annotations

import json
import queue
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any


@dataclass
class Job:
    """One generation, in plain values (it crosses the process boundary)."""

    messages: list[dict[str, str]]
    raw_prompt: str | None  # /v1/completions: continue this text, no chat template
    max_tokens: int  # the request's limit, capped by the edge's
    temperature: float
    top_p: float
    top_k: int | None
    seed: int | None
    repetition_penalty: float
    stops: list[str] = field(default_factory=list)


@dataclass
class Options:
    """What the worker loads."""

    model_dir: str
    threads: int
    provider: str
    max_concurrency: int
    context_tokens: int
    # "steps": continuous batching of max_concurrency rows over the model's decoder graph
    # (edge.tiers.local_batch, the CPU); "engine": og.Engine's batches of max_concurrency
    # (edge.tiers.local_engine); "off": one og.Generator per slot, each on its own thread.
    batching: str = "off"


def serve(conn: Connection, options: Options) -> None:
    """The worker's main: load the model, then serve the pipe until it closes."""
    # A Ctrl-C or a SIGTERM sent to the edge's whole process group is the edge's to handle:
    # it finishes its streams and then closes the pipe, which is what ends this process.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    lock = threading.Lock()  # generation threads send concurrently

    def send(*message: Any) -> None:
        with lock:
            conn.send(message)

    try:
        model, tokenizer, runner = _load(options, send)
    except Exception as exc:  # reported to the edge, which fails at start with it
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", None))
    stops: dict[int, threading.Event] = {}
    pool = ThreadPoolExecutor(options.max_concurrency, thread_name_prefix="edge-gen")
    try:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                return  # the edge is gone
            if message[0] == "close":
                return
            if message[0] == "stop":
                if (event := stops.get(message[1])) is not None:
                    event.set()
                elif runner is not None:
                    runner.stop(message[1])
                continue
            _, rid, job = message
            # og.Engine samples with a seed only with dynamic batching (not on the CPU):
            # there such a request runs on its own generator, as without batching.
            if runner is not None and (runner.seeds or job.seed is None or job.temperature == 0):
                runner.submit(rid, job)
                continue
            stops[rid] = threading.Event()

            def run(rid: int = rid, job: Job = job) -> None:
                try:
                    _generate(model, tokenizer, job, options.context_tokens, stops[rid],
                              lambda kind, value: send(rid, kind, value))  # fmt: skip
                except Exception as exc:  # surfaced on the edge, not lost here
                    send(rid, "error", ("failed", f"{type(exc).__name__}: {exc}"))
                finally:
                    stops.pop(rid, None)

            pool.submit(run)
    finally:
        for event in list(stops.values()):
            event.set()  # each generation ends at its next token
        if runner is not None:
            runner.close()
        pool.shutdown(wait=True, cancel_futures=True)


def _load(options: Options, send: Any) -> tuple[Any, Any, Any]:
    """(model, tokenizer, runner) for the batching mode. ``steps`` runs the decoder graph
    with onnxruntime itself: no ``og.Model`` (and no second copy of the weights)."""
    if options.batching == "steps":
        import onnxruntime_genai as og

        from edge.tiers.local_batch import StepRunner

        tokenizer = og.Tokenizer(og.Config(options.model_dir))
        runner = StepRunner(
            options.model_dir, tokenizer, threads=options.threads,
            max_rows=options.max_concurrency, context_tokens=options.context_tokens, send=send,
        )  # fmt: skip
        return None, tokenizer, runner
    if options.batching == "engine":
        from edge.tiers.local_engine import EngineRunner

        engine = {"static_batching": {"max_batch_size": options.max_concurrency}}
        model, tokenizer = load_model(options, engine)
        return model, tokenizer, EngineRunner(model, tokenizer, options.context_tokens, send)
    model, tokenizer = load_model(options)
    return model, tokenizer, None


def load_model(options: Options, engine: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """(model, tokenizer); ``engine``: the config's ``engine`` section (``og.Engine``'s)."""
    import onnxruntime_genai as og

    config = og.Config(options.model_dir)
    config.clear_providers()  # the CPU
    if options.provider != "cpu":
        config.append_provider(options.provider)
    # Threads per generation: set through the config overlay the runtime reads.
    session = {"intra_op_num_threads": options.threads, "inter_op_num_threads": 1}
    overlay: dict[str, Any] = {"model": {"decoder": {"session_options": session}}}
    if engine is not None:
        overlay["engine"] = engine
    config.overlay(json.dumps(overlay))
    model = og.Model(config)
    return model, og.Tokenizer(model)


def _generate(
    model: Any,
    tokenizer: Any,
    job: Job,
    context_tokens: int,
    stop: threading.Event,
    emit: Any,
) -> None:
    import onnxruntime_genai as og

    tokens = prompt_tokens(tokenizer, job)
    limit = answer_budget(len(tokens), job, context_tokens, emit)
    if limit is None:
        return
    prompt = len(tokens)
    params = og.GeneratorParams(model)
    options: dict[str, Any] = {
        "max_length": prompt + limit,
        "repetition_penalty": job.repetition_penalty,
    }
    if job.temperature > 0:
        options.update(do_sample=True, temperature=job.temperature, top_p=job.top_p)
        if job.top_k:
            options["top_k"] = job.top_k
    else:
        options.update(do_sample=False)
    if job.seed is not None:
        options["random_seed"] = job.seed % 2**31  # the runtime takes a 32-bit seed
    params.set_search_options(**options)
    generator = og.Generator(model, params)
    generator.append_tokens(tokens)
    decoder, scan = tokenizer.create_stream(), StopScan(job.stops)
    count, finish, cut = 0, "length", False
    while not stop.is_set():
        if generator.is_done():
            finish = "stop" if count < limit else "length"
            break
        generator.generate_next_token()
        count += 1
        piece = decoder.decode(generator.get_next_tokens()[0])
        if not piece:
            continue
        text, hit = scan.feed(piece)
        if text:
            emit("piece", text)
        if hit:
            finish, cut = "stop", True
            break
    if not cut and not stop.is_set() and (held := scan.flush()):
        emit("piece", held)  # a held tail that turned out not to start a stop string
    emit("done", (count, finish, stop.is_set()))


Message = tuple[str, int, "Job | None"]


class OwnedLoop:
    """A batching loop on its own thread, fed through an inbox: ``submit`` and ``stop`` may
    be called from any thread; ``close`` puts None in the inbox and waits for the loop."""

    thread_name = "edge-batch"
    seeds = False  # whether it takes seeded samples (else they run on their own generator)

    def _start(self) -> None:
        self._inbox: queue.Queue[Message | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def submit(self, rid: int, job: Job) -> None:
        self._inbox.put(("generate", rid, job))

    def stop(self, rid: int) -> None:
        self._inbox.put(("stop", rid, None))

    def close(self) -> None:
        self._inbox.put(None)
        self._thread.join()

    def _run(self) -> None:
        raise NotImplementedError


def answer_budget(prompt: int, job: Job, context_tokens: int, emit: Any) -> int | None:
    """How many tokens the answer may have (``prompt`` sent), or None when the prompt fills
    the window (``prompt_too_long`` sent)."""
    if prompt >= context_tokens:
        emit("error", ("prompt_too_long", (prompt, context_tokens)))
        return None
    emit("prompt", prompt)
    return min(job.max_tokens, context_tokens - prompt)


def prompt_tokens(tokenizer: Any, job: Job) -> Any:
    """The job's prompt as token ids: its text, or its chat through the model's template."""
    if job.raw_prompt is not None:
        return tokenizer.encode(job.raw_prompt)
    chat = tokenizer.apply_chat_template(json.dumps(job.messages), add_generation_prompt=True)
    return tokenizer.encode(chat)


class StopScan:
    """The request's stop strings over the text so far. ``feed`` gives what may be sent of
    a new piece and whether a stop string has been reached (nothing from it on is sent). A
    tail that could begin a stop string is held back until the next piece settles it, so
    a stop string split over tokens never reaches the client; ``flush`` gives what is held
    when the generation ends another way. Only the held tail is kept and searched: a stop
    string cannot begin in text already sent (its start would have been held), so each
    token costs the same however long the answer."""

    def __init__(self, stops: list[str]) -> None:
        self.stops, self.held = [s for s in stops if s], ""

    def feed(self, piece: str) -> tuple[str, bool]:
        if not self.stops:
            return piece, False
        text = self.held + piece
        hit = min((i for s in self.stops if (i := text.find(s)) >= 0), default=-1)
        if hit >= 0:
            self.held = ""
            return text[:hit], True
        keep = max(
            (k for s in self.stops for k in range(1, len(s)) if text.endswith(s[:k])),
            default=0,
        )
        cut = len(text) - keep
        self.held = text[cut:]
        return text[:cut], False

    def flush(self) -> str:
        out, self.held = self.held, ""
        return out
