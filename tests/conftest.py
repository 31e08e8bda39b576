"""Fixtures that start the real parts on loopback ports: Redis Stack, core (+vLLM), edge.

Servers are session-scoped (the vLLM engine takes ~30-60 s to start on a CPU) and stopped
with their whole process group at the end; their logs are printed when they fail to start.
"""

from __future__ import annotations

import os
import re
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bench.common import free_port  # also imported from here by the tests
from shared.paths import default_home
from shared.redis_server import redis_command, redis_env

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
# The session core requires this bearer token from edges; every test edge sends it.
CORE_TOKEN = "test-core-token-" + os.urandom(8).hex()


def metric(url: str, name: str, labels: str = "") -> float:
    """Sum of a Prometheus metric's samples (those whose labels contain ``labels``)."""
    # 30 s: a scrape is no timing test. On 2 cores shared with two CPU engines, a core's
    # /metrics went unanswered for 10-18 s three times in about 30 runs of a pool test
    # (its event loop idle when sampled; not explained), and the test failed on it.
    text = httpx.get(url + "/metrics", timeout=30, verify=False).text
    pattern = rf"^{re.escape(name)}(\{{[^}}]*{re.escape(labels)}[^}}]*\}})? ([0-9.e+-]+)$"
    return sum(float(m.group(2)) for m in re.finditer(pattern, text, flags=re.M))


def eventually(check: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Poll ``check`` until it holds or ``timeout`` passes (no timing is asserted)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


@dataclass
class Server:
    name: str
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        import signal

        from shared.process import _signal_group

        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


def start(name: str, argv: list[str], env: dict[str, str], log_dir: Path, url: str) -> Server:
    log = log_dir / f"{name}.log"
    out = open(log, "wb")
    proc = subprocess.Popen(
        argv,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    return Server(name, proc, url, log)


def wait_ready(
    server: Server, path: str, timeout: float, verify: ssl.SSLContext | bool = False
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            pytest.fail(f"{server.name} exited with {server.proc.returncode}:\n{server.tail()}")
        try:
            # Readiness only: a self-signed test certificate is fine here (``verify`` carries a
            # client certificate where the server asks for one).
            if httpx.get(server.url + path, timeout=2, verify=verify).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    server.stop()
    pytest.fail(f"{server.name} not ready after {timeout:.0f}s:\n{server.tail()}")


@pytest.fixture(scope="session")
def home() -> Path:
    return default_home()


@pytest.fixture(scope="session")
def models_dir(home: Path) -> Path:
    models = Path(os.environ.get("EDGECORE_EDGE_MODELS_DIR", home / "models"))
    needed = [
        "all-minilm-l6-v2-onnx",
        "smollm2-135m-instruct-hf",
        "smollm2-135m-instruct-onnx-int8",
    ]
    missing = [n for n in needed if not (models / n).exists()]
    if missing:
        pytest.fail(f"models missing in {models}: {missing}; run `edgecore models prepare`")
    return models


@pytest.fixture(scope="session")
def trained_router(models_dir: Path) -> Path:
    """The router artifact, trained from ../shared/data at prepare time (skip without it)."""
    path = models_dir / "router" / "router.npz"
    if not path.exists():
        pytest.skip(
            f"no trained router at {path}: ../shared/data/router was absent when the models "
            "were prepared, so the edge routes by rules only"
        )
    return path


@pytest.fixture(scope="session")
def trained_verifier(models_dir: Path) -> Path:
    """The cache verifier, trained from ../shared/data at prepare time (skip without it)."""
    folder = models_dir / "verifier"
    if not (folder / "verifier.npz").exists():
        pytest.skip(
            f"no cache verifier in {folder}: ../shared/data/cache was absent when the models "
            "were prepared, so the edge serves exact repeats only"
        )
    return folder


@pytest.fixture(scope="session")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("logs")


@pytest.fixture(scope="session")
def redis_url(home: Path, log_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    data = tmp_path_factory.mktemp("redis")
    server = start(
        "redis",
        redis_command(port=port, data_dir=data),
        redis_env(home),
        log_dir,
        f"redis://127.0.0.1:{port}/0",
    )
    import redis

    deadline = time.monotonic() + 20
    while True:
        try:
            if redis.Redis(port=port).ping():
                break
        except redis.ConnectionError:
            if time.monotonic() > deadline or server.proc.poll() is not None:
                server.stop()
                pytest.fail(f"redis did not start:\n{server.tail()}")
            time.sleep(0.1)
    yield server.url
    server.stop()


def service_env(**values: str) -> dict[str, str]:
    env = dict(os.environ)
    # Up to three CPU engines share this machine's two cores in the suite (the session's
    # and a pool's two replicas): a step takes seconds, and a starved engine worker once
    # stalled for a minute. The progress watch is off here (its tests turn it on), so the
    # other tests keep waiting through such stalls as they always did.
    env["EDGECORE_CORE_HEALTH__PROGRESS_TIMEOUT_S"] = "0"
    env.update(values)
    return env


@dataclass
class CorePorts:
    core: int
    engine: int


@pytest.fixture(scope="session")
def core_ports() -> CorePorts:
    return CorePorts(core=free_port(), engine=free_port())


@pytest.fixture(scope="session")
def core_url(models_dir: Path, log_dir: Path, core_ports: CorePorts) -> Iterator[str]:
    env = service_env(
        EDGECORE_CORE_PORT=str(core_ports.core),
        EDGECORE_CORE_ENGINE__PORT=str(core_ports.engine),
        EDGECORE_CORE_ENGINE__MODEL=str(models_dir / "smollm2-135m-instruct-hf"),
        EDGECORE_CORE_AUTH_TOKEN=CORE_TOKEN,
    )
    server = start(
        "core",
        [sys.executable, "-m", "tools.cli", "core", "serve"],
        env,
        log_dir,
        f"http://127.0.0.1:{core_ports.core}",
    )
    wait_ready(server, "/readyz", timeout=900)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def engine_url(core_url: str, core_ports: CorePorts) -> str:
    return f"http://127.0.0.1:{core_ports.engine}"


def start_edge(name: str, log_dir: Path, models_dir: Path, **settings: str) -> Server:
    port = free_port()
    scheme = "https" if "tls_certfile" in settings else "http"
    env = service_env(
        EDGECORE_EDGE_PORT=str(port),
        EDGECORE_EDGE_MODELS_DIR=str(models_dir),
        EDGECORE_EDGE_CORE__TOKEN=CORE_TOKEN,
        **{f"EDGECORE_EDGE_{k.upper()}": v for k, v in settings.items()},
    )
    server = start(
        name,
        [sys.executable, "-m", "tools.cli", "edge", "serve"],
        env,
        log_dir,
        f"{scheme}://127.0.0.1:{port}",
    )
    wait_ready(server, "/healthz", timeout=120)
    return server


@dataclass
class Keys:
    file: Path
    alpha: str  # tenant "alpha": no limits
    beta: str  # tenant "beta": no limits (cross-tenant probes)
    limited: str  # tenant "limited": 3 requests per minute
    edge_only: str  # tenant "edge-only": may use the edge model only
    fuzz: str  # tenant "fuzz": auto and the edge models (the fuzzed edge has no core)
    capped: str  # tenant "capped": at most 2 cache entries
    sampled: str  # tenant "sampled": opted in to caching temperature > 0 answers
    batch: str  # tenant "batch": the core admits its forwarded requests as batch
    personal: str  # tenant "personal": cached answers shared only by the same `user`
    admin: str  # an admin key (not a tenant key)

    def auth(self, key: str | None = None) -> dict[str, str]:
        return {"authorization": f"Bearer {key or self.alpha}"}


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    from edge.tenancy.keys import add_key, dump_keys_file, load_keys_file, new_key

    path = tmp_path_factory.mktemp("keys") / "keys.toml"
    names = (
        "alpha", "beta", "limited", "edge-only", "fuzz", "capped", "sampled", "batch", "personal",
    )  # fmt: skip
    plain = {name: add_key(path, name) for name in names}
    tenants = load_keys_file(path)
    tenants["limited"] = tenants["limited"].model_copy(update={"requests_per_minute": 3})
    tenants["edge-only"] = tenants["edge-only"].model_copy(
        update={"models": frozenset({"edge-smollm2-135m"})}
    )
    tenants["fuzz"] = tenants["fuzz"].model_copy(
        update={"models": frozenset({"auto", "edge-smollm2-135m", "edge-minilm-l6-v2"})}
    )
    tenants["capped"] = tenants["capped"].model_copy(update={"cache_max_entries": 2})
    tenants["sampled"] = tenants["sampled"].model_copy(update={"cache_nondeterministic": True})
    tenants["batch"] = tenants["batch"].model_copy(update={"core_priority": "batch"})
    tenants["personal"] = tenants["personal"].model_copy(update={"cache_scope": "user"})
    path.write_text(dump_keys_file(tenants))
    return Keys(
        path, plain["alpha"], plain["beta"], plain["limited"], plain["edge-only"], plain["fuzz"],
        plain["capped"], plain["sampled"], plain["batch"], plain["personal"], new_key(),
    )  # fmt: skip


@pytest.fixture(scope="session")
def edge_url(
    core_url: str, redis_url: str, models_dir: Path, log_dir: Path, keys: Keys
) -> Iterator[str]:
    server = start_edge(
        "edge", log_dir, models_dir, core__url=core_url, redis__url=redis_url,
        keys_file=str(keys.file),
    )  # fmt: skip
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"evaluation data not found at {SHARED_DATA}")
    return SHARED_DATA


def gateway(name: str, engine_port: int, log_dir: Path) -> Server:
    """A core gateway relaying to the session's engine: it can be frozen on its own."""
    port = free_port()
    env = service_env(
        EDGECORE_CORE_PORT=str(port),
        EDGECORE_CORE_ENGINE__PORT=str(engine_port),
        EDGECORE_CORE_MANAGE_ENGINE="false",
    )
    server = start(name, [sys.executable, "-m", "tools.cli", "core", "serve"], env, log_dir,
                   f"http://127.0.0.1:{port}")  # fmt: skip
    wait_ready(server, "/readyz", timeout=60)
    return server


def engine_ports() -> int:
    """A port P with P + 1 also free: replica i's engine listens on ENGINE__PORT + i."""
    while True:
        base = free_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", base + 1))
            except OSError:
                continue
        return base
