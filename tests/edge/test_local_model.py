"""The edge model (edge/tiers/local_model.py): a provider this onnxruntime-genai build lacks
fails at start, by name; the window comes from the model folder; the model runs in its own
process, which ends with the edge, and whose death fails streams instead of hanging them."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import onnxruntime_genai as og
import pytest

from edge.tiers.local_model import (
    PROVIDERS,
    Generation,
    LocalModel,
    ModelProcessDied,
    PromptTooLong,
    ProviderUnavailable,
    check_provider,
    context_length,
)
from edge.tiers.local_worker import StopScan
from shared.schemas import ChatCompletionRequest
from tests.edge.fakes import RefusingTokenizer


def test_the_cpu_is_always_there() -> None:
    check_provider("cpu")


def test_an_unknown_provider_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ProviderUnavailable, match="'tpu' is not an onnxruntime-genai") as e:
        check_provider("tpu")
    assert all(name in str(e.value) for name in PROVIDERS)


@pytest.mark.skipif(og.is_cuda_available(), reason="this build has CUDA")
def test_a_provider_this_build_lacks_fails_at_start_by_name(tmp_path: Path) -> None:
    with pytest.raises(ProviderUnavailable, match=r"LOCAL__PROVIDER='cuda'.*cannot run on cuda"):
        # Refused before the folder is read: no model needed to be told.
        LocalModel(tmp_path, threads=1, max_concurrency=1, queue_timeout_s=1.0,
                   context_tokens=2048, max_new_tokens=16, provider="cuda")  # fmt: skip


def test_the_context_window_comes_from_the_model_folder(tmp_path: Path) -> None:
    assert context_length(tmp_path) is None  # no genai_config.json
    (tmp_path / "genai_config.json").write_text(json.dumps({"model": {"context_length": 1024}}))
    assert context_length(tmp_path) == 1024


def test_the_shipped_edge_model_keeps_the_configured_cap(models_dir: Path) -> None:
    folder = models_dir / "smollm2-135m-instruct-onnx-int8"
    if not folder.exists():
        pytest.skip("edge model not prepared")
    assert context_length(folder) == 8192  # SmolLM2's own window
    model = LocalModel(folder, threads=1, max_concurrency=1, queue_timeout_s=1.0,
                       context_tokens=2048, max_new_tokens=16)  # fmt: skip
    try:
        assert model.context_tokens == 2048  # the setting caps it on a small edge
    finally:
        model.close()


def test_the_repetition_penalty_default_is_the_model_folders(models_dir: Path) -> None:
    folder = models_dir / "smollm2-135m-instruct-onnx-int8"
    assert json.loads((folder / "edgecore.json").read_text())["repetition_penalty"] == 1.1
    options = dict(threads=1, max_concurrency=1, queue_timeout_s=1.0, context_tokens=2048,
                   max_new_tokens=8)  # fmt: skip
    for setting, expected in ((None, 1.1), (1.3, 1.3)):  # the setting, when set, wins
        model = LocalModel(folder, repetition_penalty=setting, **options)
        try:
            assert model.repetition_penalty == expected
        finally:
            model.close()


def ask(content: str, **extra: object) -> ChatCompletionRequest:
    body = {"model": "edge", "messages": [{"role": "user", "content": content}], **extra}
    return ChatCompletionRequest.model_validate(body)


def edge_model(
    models_dir: Path, restart_backoff_s: float = 0.0, batching: str = "off", **settings: int
) -> LocalModel:
    """No restarts unless asked: a test of a dead process sees it stay dead."""
    folder = models_dir / "smollm2-135m-instruct-onnx-int8"
    if not folder.exists():
        pytest.skip("edge model not prepared")
    options = dict(threads=1, max_concurrency=1, context_tokens=2048, max_new_tokens=8)
    options.update(settings)
    return LocalModel(
        folder, queue_timeout_s=5.0, restart_backoff_s=restart_backoff_s, batching=batching,
        **options,
    )  # fmt: skip


def alive(pid: int | None) -> bool:
    try:
        os.kill(pid or -1, 0)
        os.waitpid(pid or -1, os.WNOHANG)  # reap it if it is our zombie
    except (ProcessLookupError, ChildProcessError):
        return False
    return True


def test_the_model_runs_in_its_own_process_which_ends_with_close(models_dir: Path) -> None:
    model = edge_model(models_dir)
    assert model.pid is not None and model.pid != os.getpid() and alive(model.pid)

    async def answer() -> tuple[str, Generation]:
        gen = Generation()
        text = "".join([p async for p in model.stream(ask("Say hello.", temperature=0), gen)])
        return text, gen

    async def run() -> None:  # one event loop, as in the edge: the pieces arrive on it
        async with asyncio.timeout(60):
            text, gen = await answer()
            assert text and gen.prompt_tokens > 0 and 0 < gen.completion_tokens <= 8
            # A SIGTERM to the edge's process group is the edge's to handle: the model
            # stays until the edge closes it (its streams may still be finishing).
            os.kill(model.pid or -1, signal.SIGTERM)
            assert (await answer())[0]

    try:
        asyncio.run(run())
    finally:
        model.close()
    assert not alive(model.pid)


def test_a_dead_model_process_fails_streams_instead_of_hanging_them(models_dir: Path) -> None:
    model = edge_model(models_dir, max_new_tokens=400)

    async def run() -> None:
        async with asyncio.timeout(60):
            essay = ask("Write a long essay about the sea.", temperature=0)
            stream = model.stream(essay, Generation())
            await anext(stream)  # generating
            os.kill(model.pid or -1, signal.SIGKILL)
            with pytest.raises(ModelProcessDied):
                async for _ in stream:
                    pass
            assert model.running == 0  # the slot came back
            with pytest.raises(ModelProcessDied):  # and the next request is told at once
                await anext(model.stream(ask("Hi."), Generation()))

    try:
        asyncio.run(run())
    finally:
        model.close()


async def until(check: Callable[[], bool]) -> None:
    """Poll (the caller's timeout bounds it): the model's state changes on another thread."""
    for _ in itertools.count():
        if check():
            return
        await asyncio.sleep(0.05)


def test_a_dead_model_process_is_replaced_and_serves_again(models_dir: Path) -> None:
    model = edge_model(models_dir, restart_backoff_s=0.5)
    first = model.pid

    async def answer() -> str:
        return "".join([p async for p in model.stream(ask("Say hi.", temperature=0), Generation())])

    async def run() -> None:
        async with asyncio.timeout(120):
            assert await answer()
            os.kill(first or -1, signal.SIGKILL)
            await until(lambda: not model.alive)  # the reader sees the pipe close
            with pytest.raises(ModelProcessDied):  # down until the new one has loaded
                await answer()
            await until(lambda: model.alive)
            assert model.restarts == 1 and model.pid != first and alive(model.pid)
            assert await answer()  # the new process serves, through the same client

    try:
        asyncio.run(run())
    finally:
        model.close()
    assert not alive(model.pid) and not alive(first)


def test_a_folder_that_is_no_model_fails_at_start_with_the_runtimes_reason(
    tmp_path: Path,
) -> None:
    (tmp_path / "genai_config.json").write_text(json.dumps({"model": {"type": "nonesuch"}}))
    with pytest.raises(ModelProcessDied, match="failed to load"):
        LocalModel(tmp_path, threads=1, max_concurrency=1, queue_timeout_s=1.0,
                   context_tokens=2048, max_new_tokens=16)  # fmt: skip


def test_a_model_process_dead_before_any_request_fails_the_first_one(models_dir: Path) -> None:
    model = edge_model(models_dir)
    os.kill(model.pid or -1, signal.SIGKILL)
    model._process.join(10)  # gone before the edge asked anything: no reader yet

    async def run() -> None:
        async with asyncio.timeout(30):
            with pytest.raises(ModelProcessDied):
                await anext(model.stream(ask("Hi."), Generation()))
            assert model.running == 0

    try:
        asyncio.run(run())
    finally:
        model.close()


@pytest.mark.parametrize("batching", ["off", "engine", "steps"])
def test_eight_concurrent_streams_each_get_their_own_tokens_and_one_can_leave(
    models_dir: Path, batching: str
) -> None:
    """Eight streams at once: each gets the tokens it gets alone (greedy), in order; one
    that leaves after its first piece stops, frees its slot and the others finish. With
    ``batching="engine"`` they share decode steps (og.Engine, a static batch of 8); with
    ``"steps"`` too (continuous batching over the decoder graph, rows of their own lengths)."""
    model = edge_model(models_dir, batching=batching, max_concurrency=8, max_new_tokens=12)
    prompts = [
        "Name a colour.", "Write a haiku about the sea.", "What is two plus two?",
        "Tell me a joke.", "Describe a cat.", "Why is the sky blue?", "List three fruits.",
        "Say hello in French.",
    ]  # fmt: skip

    async def answer(prompt: str, leave_after_first: bool = False) -> list[str]:
        pieces: list[str] = []
        stream = model.stream(ask(prompt, temperature=0), Generation())
        async for piece in stream:
            pieces.append(piece)
            if leave_after_first:
                await stream.aclose()  # the client left
                break
        return pieces

    async def run() -> None:
        async with asyncio.timeout(300):
            alone = [await answer(p) for p in prompts]
            together = await asyncio.gather(
                *(answer(p, leave_after_first=i == 3) for i, p in enumerate(prompts))
            )
            for i, (solo, shared) in enumerate(zip(alone, together, strict=True)):
                if i == 3:
                    assert shared == solo[:1]  # it left after its first piece
                else:
                    assert shared == solo, prompts[i]
            assert model.cancelled == 1 and model.running == 0 and model.waiting == 0

    try:
        asyncio.run(run())
    finally:
        model.close()


@pytest.mark.parametrize("batching", ["engine", "steps"])
def test_batching_honours_stop_strings_limits_and_seeded_samples(
    models_dir: Path, batching: str
) -> None:
    model = edge_model(models_dir, batching=batching, max_concurrency=4, max_new_tokens=16)

    async def answer(prompt: str, **extra: object) -> tuple[str, Generation]:
        gen = Generation()
        return "".join([p async for p in model.stream(ask(prompt, **extra), gen)]), gen

    async def run() -> None:
        async with asyncio.timeout(120):
            full, gen = await answer("Count from one to ten in words.", temperature=0)
            assert gen.finish_reason == "length" and gen.completion_tokens == 16
            cut = full[len(full) // 2 : len(full) // 2 + 3]
            stopped, gen = await answer("Count from one to ten in words.", temperature=0,
                                        stop=[cut])  # fmt: skip
            assert stopped == full[: full.index(cut)] and gen.finish_reason == "stop"
            # The same seed, the same answer (with the engine, a seeded sample runs on its
            # own generator: its static batches take no seed; with steps, in the batch).
            seeded = [await answer("Name a bird.", temperature=1.0, seed=7) for _ in range(2)]
            assert seeded[0][0] == seeded[1][0] and seeded[0][0]
            with pytest.raises(PromptTooLong):
                await answer("word " * 3000, temperature=0)
            assert model.running == 0

    try:
        asyncio.run(run())
    finally:
        model.close()


def scanned(stops: list[str], pieces: list[str]) -> tuple[list[str], bool, str]:
    scan, sent, hit = StopScan(stops), [], False
    for piece in pieces:
        text, hit = scan.feed(piece)
        sent.append(text)
        if hit:
            break
    return sent, hit, scan.flush() if not hit else ""


def test_a_stop_string_split_over_tokens_never_reaches_the_client() -> None:
    # "901" arrives one digit per token: "9" and "0" are held until "1" settles it.
    sent, hit, _ = scanned(["901"], list("1234567890123"))
    assert "".join(sent) == "12345678" and hit
    # Inside one piece: what comes before it is sent, nothing after.
    assert scanned(["END"], ["abc", "dEND fgh"]) == (["abc", "d"], True, "")


def test_a_held_tail_that_starts_no_stop_string_is_sent_after_all() -> None:
    sent, hit, rest = scanned(["90!"], list("1290"))
    assert "".join(sent) == "12" and not hit and rest == "90"  # flushed at the end
    sent, hit, rest = scanned(["90!"], list("12909"))  # "90" was not it; the last "9" may be
    assert "".join(sent) == "1290" and rest == "9"
    assert scanned([], ["a", "b"]) == (["a", "b"], False, "")  # no stops: as it comes


def test_the_stop_scan_keeps_only_what_it_holds() -> None:
    """A long answer costs each token the same: only the held tail is searched."""
    scan = StopScan(["</s>", "User:"])
    sent = [scan.feed(piece)[0] for piece in ["word ", "<", "/", "x", " Use", "r"] * 5000]
    assert len(scan.held) < len("User:")
    assert "".join(sent) + scan.flush() == "word </x User" * 5000
    assert scan.feed(" User")[0] == " User"[: -len("User")] and scan.feed(":x") == ("", True)


def test_a_request_the_engine_cannot_take_fails_alone(models_dir: Path) -> None:
    """A request whose admission raises gets an error; the engine serves the next one."""
    import queue

    from edge.tiers.local_engine import EngineRunner
    from edge.tiers.local_worker import Job, Options, load_model

    folder = models_dir / "smollm2-135m-instruct-onnx-int8"
    model, tokenizer = load_model(Options(str(folder), 1, "cpu", 2, 2048), {})

    sent: queue.Queue[tuple[int, str, object]] = queue.Queue()
    runner = EngineRunner(model, RefusingTokenizer(tokenizer), 2048, lambda *m: sent.put(m))

    def job(text: str) -> Job:
        return Job([{"role": "user", "content": text}], None, 4, 0.0, 1.0, None, None, 1.1)

    try:
        runner.submit(1, job("boom"))
        runner.submit(2, job("Say hi."))
        ends = {}
        while len(ends) < 2:
            rid, kind, value = sent.get(timeout=60)
            if kind in ("done", "error"):
                ends[rid] = (kind, value)
        assert ends[1] == ("error", ("failed", "ValueError: cannot template this"))
        assert ends[2][0] == "done"
    finally:
        runner.close()


def test_a_failed_engine_step_fails_its_turns_and_the_engine_goes_on(
    models_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One decode step raises (injected: the real engine fails no step on demand): every
    turn in it gets an error, none waits forever, and the next request is answered."""
    import queue

    from edge.tiers.local_engine import EngineRunner
    from edge.tiers.local_worker import Job, Options, load_model

    real_engine = og.Engine

    class FailsOnce:
        def __init__(self, model: object) -> None:
            self.real, self.steps = real_engine(model), 0

        def __getattr__(self, name: str) -> object:
            return getattr(self.real, name)

        def run(self, events: object) -> object:
            self.steps += 1
            if self.steps == 3:  # both turns are in by then: prefill took the first steps
                raise RuntimeError("injected step failure")
            return self.real.run(events)

    monkeypatch.setattr(og, "Engine", FailsOnce)
    folder = models_dir / "smollm2-135m-instruct-onnx-int8"
    model, tokenizer = load_model(Options(str(folder), 1, "cpu", 2, 2048), {})
    sent: queue.Queue[tuple[int, str, object]] = queue.Queue()
    runner = EngineRunner(model, tokenizer, 2048, lambda *m: sent.put(m))

    def job(text: str) -> Job:
        return Job([{"role": "user", "content": text}], None, 32, 0.0, 1.0, None, None, 1.1)

    def ends(count: int) -> dict[int, tuple[str, object]]:
        out: dict[int, tuple[str, object]] = {}
        while len(out) < count:
            rid, kind, value = sent.get(timeout=60)
            if kind in ("done", "error"):
                out[rid] = (kind, value)
        return out

    try:
        runner.submit(1, job("Count to ten."))
        runner.submit(2, job("Name three colours."))
        failed = ("error", ("failed", "RuntimeError: injected step failure"))
        assert ends(2) == {1: failed, 2: failed}
        runner.submit(3, job("Say hi."))
        assert ends(1)[3][0] == "done"
    finally:
        runner.close()


def _broken_engine_process(folder: str, conn: object) -> None:
    """In a process of its own: an engine whose steps all fail (injected around the real
    og.Engine), serving one request."""
    import onnxruntime_genai as og

    from edge.tiers.local_engine import EngineRunner
    from edge.tiers.local_worker import Job, Options, load_model

    real_engine = og.Engine

    class Broken:
        def __init__(self, model: object) -> None:
            self.real, self.failed = real_engine(model), False

        def __getattr__(self, name: str) -> object:
            return getattr(self.real, name)

        def has_pending_requests(self) -> bool:  # its cancelled turns never leave
            return self.failed or bool(self.real.has_pending_requests())

        def run(self, events: object) -> object:
            self.failed = True
            raise RuntimeError("injected: every step fails")

    og.Engine = Broken  # type: ignore[misc]
    model, tokenizer = load_model(Options(folder, 1, "cpu", 2, 2048), {})
    runner = EngineRunner(model, tokenizer, 2048, lambda *m: conn.send(m))  # type: ignore[attr-defined]
    runner.submit(1, Job([{"role": "user", "content": "Hi."}], None, 8, 0.0, 1.0, None, None, 1.1))
    runner._thread.join()


def test_an_engine_that_fails_with_no_turn_left_ends_its_process(models_dir: Path) -> None:
    """A step that fails when no turn is left to fail means the engine itself is broken:
    its turns got their errors first, then the process exits 70, which the edge sees as
    the model's death (it fails what is open and starts a new process)."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    mine, theirs = context.Pipe()
    folder = str(models_dir / "smollm2-135m-instruct-onnx-int8")
    process = context.Process(target=_broken_engine_process, args=(folder, theirs))
    process.start()
    theirs.close()
    got = []
    with contextlib.suppress(EOFError):
        while mine.poll(120):
            got.append(mine.recv())
    process.join(30)
    assert process.exitcode == 70
    assert (1, "error", ("failed", "RuntimeError: injected: every step fails")) in got
