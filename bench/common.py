"""What every benchmark here shares: ports, percentiles, a Redis, an edge, results on disk."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from shared.paths import default_home
from shared.redis_server import redis_command, redis_env

RESULTS = Path("bench/results")


def free_port() -> int:
    """A free port below the kernel's ephemeral range.

    A port the kernel hands out for ``bind(0)`` is one it may hand out again: a server
    started a few seconds later (after vLLM, whose ZeroMQ sockets take ephemeral ports)
    found it taken now and then ("Address already in use").
    """
    for _ in range(200):
        port = random.randrange(20_000, 32_000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-32000")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    """Milliseconds in, milliseconds out."""
    return {
        "n": len(values),
        "p50_ms": round(pct(values, 0.5), 3),
        "p95_ms": round(pct(values, 0.95), 3),
        "p99_ms": round(pct(values, 0.99), 3),
        "mean_ms": round(statistics.fmean(values), 3),
    }


async def load(
    op: Callable[[int], Awaitable[None]], *, requests: int, clients: int
) -> dict[str, float]:
    """Run ``requests`` calls of ``op`` from ``clients`` concurrent workers; ms per call."""
    latencies: list[float] = []
    wall = await _timed(op, range(requests), clients, latencies)
    return {**summary(latencies), "clients": clients, "per_s": round(requests / wall, 1)}


async def alternating(
    ops: dict[str, Callable[[int], Awaitable[None]]],
    *,
    requests: int,
    clients: int,
    rounds: int = 5,
) -> dict[str, dict[str, float]]:
    """``load`` for each of ``ops``, taken in turns: ``rounds`` rounds of ``requests /
    rounds`` calls each, pooled per op. A machine whose speed drifts during a run then
    slows every op alike, where one op's whole run after another's would take the drift
    as a difference between them."""
    latencies: dict[str, list[float]] = {name: [] for name in ops}
    wall = dict.fromkeys(ops, 0.0)
    share = max(1, requests // rounds)
    for r in range(rounds):
        for name, op in ops.items():
            calls = range(r * share, (r + 1) * share)
            wall[name] += await _timed(op, calls, clients, latencies[name])
    rate = {name: round(share * rounds / wall[name], 1) for name in ops}
    return {
        name: {**summary(latencies[name]), "clients": clients, "per_s": rate[name]} for name in ops
    }


async def _timed(
    op: Callable[[int], Awaitable[None]], calls: range, clients: int, latencies: list[float]
) -> float:
    """Seconds for ``calls`` of ``op`` from ``clients`` workers; each call's ms appended."""
    counter = iter(calls)

    async def worker() -> None:
        for i in counter:
            t = time.perf_counter()
            await op(i)
            latencies.append((time.perf_counter() - t) * 1000.0)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    return time.perf_counter() - t0


@contextlib.contextmanager
def redis_server() -> Iterator[int]:
    """The bundled Redis Stack on a free port, for the length of a benchmark."""
    port = free_port()
    proc = subprocess.Popen(
        redis_command(port=port, data_dir=Path(tempfile.mkdtemp())),
        env=redis_env(default_home()),
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def edge_server(
    log: Path, *, source: Path | None = None, profile: Path | None = None, **settings: str
) -> Iterator[str]:
    """``edgecore edge serve`` on a free port with ``EDGECORE_EDGE_*`` settings (nested:
    ``cache__index`` is ``EDGECORE_EDGE_CACHE__INDEX``); ``source``: run that checkout's code
    (``baseline``) in this venv."""
    with edge_process(log, source=source, profile=profile, **settings) as (url, _):
        yield url


@contextlib.contextmanager
def edge_process(
    log: Path, *, source: Path | None = None, profile: Path | None = None, **settings: str
) -> Iterator[tuple[str, int]]:
    """Like ``edge_server``, also yielding the edge's pid (to read its CPU time).

    ``profile``: sample the edge with py-spy while it serves, written there as a flame graph
    (SVG) when the edge stops.
    """
    port = free_port()
    env = dict(os.environ, EDGECORE_EDGE_PORT=str(port))
    env.update({f"EDGECORE_EDGE_{k.upper()}": v for k, v in settings.items()})
    if source is not None:  # `python -m` puts the working directory first on sys.path
        env["PYTHONPATH"] = str(source)
        # An older checkout may predate a section (redis, embed): give it the flat names too.
        from edge.settings import EdgeSettings

        flat = {v: k for k, v in EdgeSettings.legacy_names().items()}
        for name, value in settings.items():
            section, _, field = name.partition("__")
            if (section, field) in flat:
                env[f"EDGECORE_EDGE_{flat[section, field].upper()}"] = value
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tools.cli", "edge", "serve"],
            env=env,
            cwd=source,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 300
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"edge did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        with flame_graph(proc.pid, profile):
            yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(30)


@contextlib.contextmanager
def flame_graph(pid: int, out: Path | None) -> Iterator[None]:
    """py-spy sampling ``pid`` (its native frames too) while the block runs; the flame graph
    is written to ``out`` at the end. Nothing when ``out`` is None."""
    if out is None:
        yield
        return
    exe = bench_venv("py-spy>=0.4", "py-spy")
    argv = [str(exe), "record", "--pid", str(pid), "--output", str(out), "--format",
            "flamegraph", "--rate", "250", "--nonblocking"]  # fmt: skip
    spy = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes the graph when interrupted
        try:
            _, err = spy.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            spy.kill()
            err = b""
        progress(f"flame graph: {out}" if out.exists() else f"py-spy wrote nothing: {err!r}")


@contextlib.contextmanager
def baseline(ref: str, tmp: Path) -> Iterator[Path]:
    """A checkout of ``ref`` (a git worktree under ``tmp``) to measure against the working
    tree in the same run: "before" and "after" on the same machine, minutes apart."""
    root = Path(__file__).resolve().parents[1]
    tree = tmp / f"baseline-{uuid.uuid4().hex[:6]}"
    subprocess.run(
        ["git", "-C", str(root), "worktree", "add", "--detach", str(tree), ref],
        check=True, capture_output=True,
    )  # fmt: skip
    try:
        yield tree
    finally:
        subprocess.run(
            ["git", "-C", str(root), "worktree", "remove", "--force", str(tree)],
            check=False, capture_output=True,
        )  # fmt: skip


def commit_of(ref: str) -> str:
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", ref], capture_output=True, text=True
    )
    return out.stdout.strip() or ref


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def save(name: str, results: dict[str, Any], out: Path | None = None) -> Path:
    path = out or RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")
    return path


Results = dict[str, Any]


def run_bench(
    name: str,
    doc: str | None,
    measure: Callable[[argparse.Namespace], Results],
    *,
    arguments: Callable[[argparse.ArgumentParser], None] | None = None,
    plot: Callable[[Results, Path], None] | None = None,
    table: Callable[[Results], str] | None = None,
    argv: list[str] | None = None,
    raw_help: bool = False,
) -> Path:
    """One benchmark's command line, run and output, the same for every bench here.

    ``doc`` is the help (the module's docstring; ``raw_help``: kept as written), ``arguments``
    adds the bench's own options to the common ``--out`` (the JSON; by default
    ``bench/results/NAME.json``). ``measure`` returns the results; they are saved as JSON, drawn
    beside it as a PNG (``plot``), printed as a table (``table``), and the files named.
    """
    formatter = argparse.RawTextHelpFormatter if raw_help else argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=doc, formatter_class=formatter)
    if arguments is not None:
        arguments(parser)
    parser.add_argument("--out", type=Path, default=None, help=f"default {RESULTS}/{name}.json")
    args = parser.parse_args(argv)
    results = measure(args)
    path = save(name, results, args.out)
    written = [path]
    if plot is not None:
        png = getattr(args, "png", None) or path.with_suffix(".png")
        plot(results, png)
        written.append(png)
    if table is not None:
        print(table(results))
    print("wrote " + " and ".join(str(p) for p in written))
    return path


# --- processes, stacks and streams shared by the forward, replay and vLLM-client benches ---

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
BENCH_VENV = default_home() / "bench-venv"


def shared_data(*parts: str) -> Path:
    """A file under ``../shared/data``; exits with a clear message when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        raise SystemExit(f"{path} is absent: this benchmark reads ../shared/data beside the repo")
    return path


def wait_http(url: str, *, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    """Poll ``url`` until it answers below 500; exit with the log's tail if ``proc`` dies."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code < 500:
                return
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{url} did not come up:\n{log.read_text()[-3000:]}")
        time.sleep(0.3)


def _stop_group(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the child's process group, then SIGKILL what is left after ``timeout``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def spawn(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own process group, its output to ``log``, ``env`` added."""
    with log.open("wb") as out:
        return subprocess.Popen(
            argv,
            env=dict(os.environ, **(env or {})),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@contextlib.contextmanager
def child(
    argv: list[str],
    log: Path,
    *,
    ready: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> Iterator[int]:
    """Run ``argv`` in its own process group until ``ready`` answers; yields its pid.

    On exit the whole group gets SIGTERM (SIGKILL after 20 s): nothing is left behind.
    """
    proc = spawn(argv, log, env)
    try:
        wait_http(ready, proc=proc, log=log, timeout=timeout)
        yield proc.pid
    finally:
        _stop_group(proc, 20)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live descendants."""
    import psutil  # type: ignore[import-untyped]

    root = psutil.Process(pid)
    total = 0.0
    for p in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            t = p.cpu_times()
            total += t.user + t.system
    return total


def pid_on_port(port: int) -> int:
    """The process listening on a loopback TCP ``port``."""
    import psutil

    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            if conn.pid is not None:
                return int(conn.pid)
    raise RuntimeError(f"nothing listens on port {port}")


@dataclass
class Stack:
    """A running ``edgecore up``: URLs, the development key and each process's port."""

    edge: str
    core: str
    engine: str
    key: str  # the edge's development key
    core_token: str  # what edges present to the core (EDGECORE_CORE_AUTH_TOKEN)
    ports: dict[str, int]
    log: Path

    @property
    def core_headers(self) -> dict[str, str]:
        """Headers for calling the core directly, as an edge does."""
        return {"authorization": f"Bearer {self.core_token}"}


@contextlib.contextmanager
def stack(log: Path, env: dict[str, str] | None = None) -> Iterator[Stack]:
    """``edgecore up`` (Redis, core + vLLM, edge) on free ports; stopped (SIGTERM) on exit.

    The core's edge token is chosen here (``EDGECORE_CORE_AUTH_TOKEN``, which ``up`` hands to
    the core and the edge), so a benchmark can also call the core directly.
    """
    ports = {name: free_port() for name in ("edge", "core", "engine", "redis")}
    token = (env or {}).get("EDGECORE_CORE_AUTH_TOKEN") or f"bench-{uuid.uuid4().hex}"
    env = {**(env or {}), "EDGECORE_CORE_AUTH_TOKEN": token}
    argv = [sys.executable, "-m", "tools.cli", "up"]
    argv += [f"--{name}-port={port}" for name, port in ports.items()]
    proc = spawn(argv, log, env)
    try:
        deadline = time.monotonic() + 900
        while "edgecore is up" not in log.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"stack did not start:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        key = re.search(r"Bearer (ec-[\w-]+)", log.read_text())
        if key is None:
            raise SystemExit("no development key in the banner")
        url = "http://127.0.0.1:{}".format
        yield Stack(url(ports["edge"]), url(ports["core"]), url(ports["engine"]), key.group(1),
                    token, ports, log)  # fmt: skip
    finally:
        # `up` stops its children in reverse order on SIGTERM; the group kill is the backstop.
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            _stop_group(proc, 5)


@dataclass
class Streamed:
    """One streamed chat completion as the client saw it (milliseconds from the request)."""

    ttft_ms: float
    total_ms: float
    headers: httpx.Headers
    finish_reason: str | None
    content: str


async def stream_chat(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Streamed:
    """POST a streaming chat completion to ``url`` and read it to the end."""
    t = time.perf_counter()
    first: float | None = None
    finish: str | None = None
    parts: list[str] = []
    async with client.stream("POST", url, json=body, headers=headers) as r:
        if r.status_code != 200:
            raise RuntimeError(f"{url}: HTTP {r.status_code} {(await r.aread())[:300]!r}")
        async for line in r.aiter_lines():
            if not line.startswith("data:") or line.endswith("[DONE]"):
                continue
            event = json.loads(line[5:])
            if "error" in event:
                raise RuntimeError(f"{url}: error event {event['error']}")
            for choice in event.get("choices") or ():
                text = (choice.get("delta") or {}).get("content")
                if text:
                    if first is None:
                        first = time.perf_counter()
                    parts.append(text)
                finish = choice.get("finish_reason") or finish
        end = time.perf_counter()
    if first is None:
        raise RuntimeError(f"{url}: the stream had no content")
    return Streamed((first - t) * 1000.0, (end - t) * 1000.0, r.headers, finish, "".join(parts))


def bench_venv(requirement: str, executable: str) -> Path:
    """``executable`` from a private venv (``<home>/bench-venv``), installing it once.

    Alternatives under test (LiteLLM) pin versions that would clash with vLLM's in .venv.
    """
    exe = BENCH_VENV / "bin" / executable
    if exe.exists():
        return exe
    progress(f"installing {requirement} into {BENCH_VENV} (once; a few minutes) ...")
    subprocess.run([sys.executable, "-m", "venv", str(BENCH_VENV)], check=True)
    pip = [str(BENCH_VENV / "bin" / "pip"), "install", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, requirement], check=True)
    if not exe.exists():
        raise SystemExit(f"{requirement} installed no {executable} in {BENCH_VENV}")
    return exe
