"""Sentence embeddings (all-MiniLM-L6-v2, ONNX INT8) run off the event loop, micro-batched.

Requests that queue up while a batch runs share the next hop to an embedding thread. Inside
it each text gets its own ONNX run: the INT8 model quantizes activations dynamically with
one scale per tensor, so in a padded batch a text's vector depends on its neighbours (the
same prompt embedded alone and inside a batch of 200 measured cosine 0.976 to itself, lower
than to a different near-duplicate prompt). A cache key must not depend on who else asked.
That costs ~1.8 ms per short text instead of ~1.1-1.3 ms batched (2 cores, one thread).
"""

from __future__ import annotations

import asyncio
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from shared.tasks import cancel_and_wait

MODEL_FILE = "model_int8.onnx"

_Counted = tuple[np.ndarray, int]  # a vector and the tokens it took


def cpu_session(path: Path, threads: int) -> ort.InferenceSession:
    """An ONNX Runtime CPU session on ``threads`` intra-op threads (the edge's models)."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


class Embedder:
    """Synchronous MiniLM embedder: tokenize, run ONNX, mean-pool, L2-normalize."""

    def __init__(self, model_dir: Path, *, threads: int = 1, max_length: int = 256) -> None:
        meta_path = model_dir / "edgecore.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        self.model_id: str = meta.get("id", f"all-minilm-l6-v2:{MODEL_FILE}")
        self.dim: int = int(meta.get("dim", 384))
        self.session = cpu_session(model_dir / MODEL_FILE, threads)
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.max_length = max_length
        self.tokenizer.enable_truncation(max_length=max_length)
        self.tokenizer.no_padding()  # tokenizer.json pads to 128; one text per run needs none

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors, one row per text; each text is run alone (see the module doc)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._embed_one(e) for e in self.tokenizer.encode_batch(texts)])

    def embed_on_threads(
        self, texts: list[str], workers: int | None = None, chunk: int = 64
    ) -> np.ndarray:
        """``embed`` for many texts at once (offline work: training, evaluation), on
        ``workers`` threads (default: one per core) sharing this session. Each text is still
        run alone, so a vector does not depend on the others; ONNX Runtime releases the GIL
        while it runs. On 2 cores, two one-thread runs side by side beat one run on two
        threads, which a short text cannot split well (docs/models.md, the build's time)."""
        parts = [texts[i : i + chunk] for i in range(0, len(texts), chunk)]
        if not parts:
            return np.zeros((0, self.dim), dtype=np.float32)
        workers = workers or os.cpu_count() or 1
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="embed") as pool:
            return np.concatenate(list(pool.map(self.embed, parts)))

    @property
    def vocab_size(self) -> int:
        return int(self.tokenizer.get_vocab_size())

    def embed_counted(self, items: list[str | list[int]]) -> tuple[np.ndarray, list[int]]:
        """Unit vectors and the tokens each used (``/v1/embeddings``): a text is tokenized,
        a token array (the model's own word-piece ids) is used as it is; both truncated."""
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32), []
        texts = [i for i in items if isinstance(i, str)]
        encoded = iter(self.tokenizer.encode_batch(texts) if texts else [])
        ids = [next(encoded).ids if isinstance(i, str) else i[: self.max_length] for i in items]
        return np.stack([self._embed_ids(x) for x in ids]), [len(x) for x in ids]

    def _embed_one(self, encoding: Encoding) -> np.ndarray:
        return self._embed_ids(encoding.ids)

    def _embed_ids(self, token_ids: list[int]) -> np.ndarray:
        ids = np.array([token_ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(None, feeds)[0][0]  # (seq, dim): last_hidden_state
        pooled = hidden.mean(axis=0)
        result: np.ndarray = (pooled / max(float(np.linalg.norm(pooled)), 1e-12)).astype(np.float32)
        return result


class BatchingEmbedder:
    """Async front: queues texts, runs them in batches on ``workers`` threads.

    Each text is still run alone (see the module doc), so a batch only saves hops to a
    thread; ``workers`` lets the texts that queue together run side by side, one per core
    (ONNX Runtime releases the GIL while it runs). Each worker takes its share of what is
    queued, so one does not sit on a long batch while another idles."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        max_batch: int = 32,
        window_ms: float = 0.0,
        workers: int = 1,
    ):
        self.embedder = embedder
        self.max_batch = max_batch
        self.window_s = window_ms / 1000.0
        self.workers = workers
        self._queue: asyncio.Queue[tuple[str | list[int], asyncio.Future[_Counted]]] = (
            asyncio.Queue()
        )
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="embed")
        self._tasks: list[asyncio.Task[None]] = []
        self._busy = 0  # workers running a batch

    @property
    def model_id(self) -> str:
        return self.embedder.model_id

    @property
    def dim(self) -> int:
        return self.embedder.dim

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._run(), name=f"embed-batcher-{i}") for i in range(self.workers)
        ]

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        self._executor.shutdown(wait=False, cancel_futures=True)

    @property
    def vocab_size(self) -> int:
        return self.embedder.vocab_size

    async def embed(self, text: str) -> np.ndarray:
        vector, _ = await self.embed_counted(text)
        return vector

    async def embed_counted(self, item: str | list[int]) -> _Counted:
        """One input's vector and token count, batched with whatever else is queued."""
        fut: asyncio.Future[_Counted] = asyncio.get_running_loop().create_future()
        await self._queue.put((item, fut))
        return await fut

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self._queue.get()]
            # Take this worker's share of whatever queued up while the previous batches ran
            # (no added latency when idle): split among the workers not running a batch. Or
            # wait a short window for a whole batch.
            idle = self.workers - self._busy
            queued = 1 + self._queue.qsize()
            share = self.max_batch if self.window_s else min(self.max_batch, -(-queued // idle))
            deadline = loop.time() + self.window_s
            while len(batch) < share:
                if not self._queue.empty():
                    batch.append(self._queue.get_nowait())
                    continue
                timeout = deadline - loop.time()
                if timeout <= 0:
                    break
                try:
                    async with asyncio.timeout(timeout):
                        batch.append(await self._queue.get())
                except TimeoutError:
                    break
            live = [(t, f) for t, f in batch if not f.done()]  # skip cancelled callers
            if not live:
                continue
            self._busy += 1
            try:
                vectors, counts = await loop.run_in_executor(
                    self._executor, self.embedder.embed_counted, [t for t, _ in live]
                )
            except Exception as exc:  # surfaced to each caller, who bypasses the cache
                for _, f in live:
                    if not f.done():
                        f.set_exception(exc)
                continue
            finally:
                self._busy -= 1
            for (_, f), v, n in zip(live, vectors, counts, strict=True):
                if not f.done():
                    f.set_result((v, n))
