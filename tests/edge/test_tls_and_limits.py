"""HTTPS with HTTP/2 via ALPN, bounded slow bodies and headers, limits without Redis."""

from __future__ import annotations

import asyncio
import datetime
import ssl
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from edge.tenancy.keys import Tenant
from edge.tenancy.limits import Limiter
from shared.errors import ApiError
from shared.redact import redact
from tests.conftest import CorePorts, Keys, free_port, service_env, start, start_edge, wait_ready


def self_signed(folder: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    certfile, keyfile = folder / "cert.pem", folder / "key.pem"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return certfile, keyfile


@pytest.fixture(scope="module")
def tls_edge(
    models_dir: Path, log_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    certfile, keyfile = self_signed(tmp_path_factory.mktemp("tls"))
    server = start_edge(
        "edge-tls", log_dir, models_dir, tls_certfile=str(certfile), tls_keyfile=str(keyfile),
        core__url=f"http://127.0.0.1:{free_port()}", redis__url=f"redis://127.0.0.1:{free_port()}/0",
        limits__body_timeout_s="1",
    )  # fmt: skip
    yield server.url.replace("127.0.0.1", "localhost"), certfile
    server.stop()


@pytest.mark.slow
def test_https_with_http2_via_alpn(tls_edge: tuple[str, Path]) -> None:
    url, certfile = tls_edge
    ctx = ssl.create_default_context(cafile=str(certfile))
    with httpx.Client(http2=True, verify=ctx) as client:
        r = client.get(url + "/healthz")
        assert r.status_code == 200 and r.http_version == "HTTP/2"
    with pytest.raises(httpx.ConnectError):  # an unknown certificate is refused
        httpx.get(url + "/healthz")


@pytest.mark.slow
def test_slow_body_is_cut_off(tls_edge: tuple[str, Path]) -> None:
    url, certfile = tls_edge
    ctx = ssl.create_default_context(cafile=str(certfile))

    def trickle() -> Iterator[bytes]:
        yield b'{"model": "auto", "messages": ['
        time.sleep(3)  # slower than the edge's 1 s body deadline
        yield b"]}"

    with httpx.Client(verify=ctx, timeout=30) as client:
        r = client.post(url + "/v1/chat/completions", content=trickle())
    assert r.status_code == 408 and r.json()["error"]["code"] == "body_timeout"


@pytest.mark.slow
def test_oversized_headers_are_refused(tls_edge: tuple[str, Path]) -> None:
    url, certfile = tls_edge
    ctx = ssl.create_default_context(cafile=str(certfile))
    with httpx.Client(verify=ctx) as client:
        try:
            r = client.get(url + "/healthz", headers={"x-big": "a" * 200_000})
        except httpx.RemoteProtocolError:
            return  # the server closed the connection: refused, and nothing crashed
        assert 400 <= r.status_code < 500
        assert client.get(url + "/healthz").status_code == 200


def test_limits_fall_back_to_local_counting_without_redis() -> None:
    async def run() -> list[int]:
        redis = Redis(port=free_port(), socket_connect_timeout=0.2, socket_timeout=0.2)
        limiter = Limiter(redis)
        tenant = Tenant(name="t", requests_per_minute=2)
        outcomes = []
        for _ in range(3):
            try:
                await limiter.check_rate(tenant, 10)
                outcomes.append(200)
            except ApiError as exc:
                outcomes.append(exc.status)
        await redis.aclose()
        assert limiter.fallbacks == 3
        return outcomes

    assert asyncio.run(run()) == [200, 200, 429]


def test_concurrency_cap() -> None:
    limiter = Limiter(None)
    tenant = Tenant(name="t", max_concurrency=1)
    limiter.acquire(tenant)
    with pytest.raises(ApiError) as info:
        limiter.acquire(tenant)
    assert info.value.status == 429
    limiter.release(tenant)
    limiter.acquire(tenant)


def test_tokens_per_minute_larger_than_budget_is_refused_outright() -> None:
    tenant = Tenant(name="t", tokens_per_minute=100)
    with pytest.raises(ApiError) as info:
        asyncio.run(Limiter(None).check_rate(tenant, 1000))
    assert info.value.code == "tokens_per_minute_exceeded"


def test_redaction() -> None:
    text = "mail bob@example.com, card 4111 1111 1111 1111, key sk-abcdefghijklmnop"
    out = redact(text)
    assert "bob@" not in out and "4111" not in out and "sk-abc" not in out
    assert redact("x" * 500).endswith("(+300 chars)")


def client_context(certfile: Path, keyfile: Path) -> ssl.SSLContext:
    """A caller that presents a client certificate (and does not check the test server's)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(str(certfile), str(keyfile))
    return context


@pytest.mark.slow
def test_edge_reaches_an_mtls_core_over_http2(
    core_url: str, core_ports: CorePorts, models_dir: Path, log_dir: Path, keys: Keys,
    tmp_path: Path,
) -> None:  # fmt: skip
    certfile, keyfile = self_signed(tmp_path / "core")
    # The edge's certificate is self-signed, so it is its own CA: the core trusts exactly it.
    edge_cert, edge_key = self_signed(tmp_path / "edge")
    port = free_port()
    env = service_env(
        EDGECORE_CORE_PORT=str(port), EDGECORE_CORE_ENGINE__PORT=str(core_ports.engine),
        EDGECORE_CORE_MANAGE_ENGINE="false", EDGECORE_CORE_TLS_CERTFILE=str(certfile),
        EDGECORE_CORE_TLS_KEYFILE=str(keyfile), EDGECORE_CORE_TLS_CLIENT_CA=str(edge_cert),
    )  # fmt: skip
    core = start("core-mtls", [sys.executable, "-m", "tools.cli", "core", "serve"], env, log_dir,
                 f"https://127.0.0.1:{port}")  # fmt: skip
    as_edge = client_context(edge_cert, edge_key)
    wait_ready(core, "/readyz", timeout=60, verify=as_edge)
    edge = start_edge(
        "edge-to-mtls-core", log_dir, models_dir, keys_file=str(keys.file),
        core__url=f"https://localhost:{port}", core__ca_file=str(certfile),
        core__client_certfile=str(edge_cert), core__client_keyfile=str(edge_key),
        redis__url=f"redis://127.0.0.1:{free_port()}/0",
    )  # fmt: skip
    try:
        body = {"model": "smollm2-135m-instruct", "max_tokens": 4,
                "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
        r = httpx.post(edge.url + "/v1/chat/completions", json=body, headers=keys.auth(),
                       timeout=60)  # fmt: skip
        assert r.status_code == 200 and r.headers["x-edgecore-tier"] == "core"
        metrics = httpx.get(core.url + "/metrics", verify=as_edge).text
        assert 'edgecore_core_requests_total{http_version="2",status="200"}' in metrics
        # Without a certificate from the trusted CA the handshake itself is refused,
        # before any bearer token is looked at.
        stranger_cert, stranger_key = self_signed(tmp_path / "stranger")
        for verify in (False, client_context(stranger_cert, stranger_key)):
            with pytest.raises(httpx.TransportError):
                httpx.get(core.url + "/readyz", verify=verify, timeout=5)
    finally:
        edge.stop()
        core.stop()
