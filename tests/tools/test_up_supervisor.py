"""``edgecore up``'s supervisor on stand-in children (plain Python processes, no models):
restart with backoff, the status file, the crash-loop stop, the leftovers of a dead child."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from shared.process import ChildProcess, descendants, kill_leftovers, proc_info
from tools import supervisor
from tools.supervisor import Supervised, Supervisor, format_status

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


async def _ready(_: ChildProcess) -> None:
    return None


def _supervisor(tmp_path: Path, argv: list[str]) -> tuple[Supervisor, Supervised]:
    child = ChildProcess("redis", argv, output=open(tmp_path / "redis.log", "ab"))
    s = Supervised(child, _ready, tmp_path / "redis.log")
    return Supervisor([s], tmp_path / "status.json", asyncio.Event()), s


async def _until(check: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


def test_a_killed_child_is_restarted_and_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(supervisor, "FIRST_BACKOFF_S", 0.05)
    asyncio.run(_killed_and_restarted(tmp_path))


async def _killed_and_restarted(tmp_path: Path) -> None:
    sup, s = _supervisor(tmp_path, SLEEPER)
    await s.start()
    watch = asyncio.create_task(sup.watch(s))
    try:
        first = s.child.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        await _until(lambda: s.state == "running" and s.child.pid != first)
        status = json.loads((tmp_path / "status.json").read_text())
        redis = status["children"]["redis"]
        assert redis["restarts"] == 1 and redis["last_exit_code"] == -9
        assert redis["last_exit"] == "killed by SIGKILL" and redis["pid"] == s.child.pid
        assert [e["event"] for e in status["events"]] == ["died", "restarted", "ready"]
        assert "redis" in format_status(status) and not sup.stop.is_set()
    finally:
        sup.stop.set()
        watch.cancel()
        await s.child.stop()


def test_a_crash_loop_stops_everything_with_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(supervisor, "FIRST_BACKOFF_S", 0.01)
    asyncio.run(_crash_loop(tmp_path))


async def _crash_loop(tmp_path: Path) -> None:
    sup, s = _supervisor(tmp_path, [sys.executable, "-c", "raise SystemExit(3)"])
    await s.start()
    async with asyncio.timeout(30):
        await sup.watch(s)
    assert sup.stop.is_set() and sup.failed
    assert s.restarts == supervisor.MAX_RESTARTS
    assert sup.message is not None and "redis died 6 times within 60 s" in sup.message
    assert "exit code 3" in sup.message


def test_what_a_dead_child_leaves_behind_is_killed() -> None:
    asyncio.run(_leftovers())


async def _leftovers() -> None:
    # A child that starts a grandchild in its own session (as the core starts vLLM).
    code = (
        "import subprocess, sys, time;"
        f"subprocess.Popen({SLEEPER!r}, start_new_session=True); time.sleep(60)"
    )
    child = ChildProcess("core", [sys.executable, "-c", code])
    await child.start()
    assert child.pid is not None
    left = []
    try:
        await _until(lambda: len(descendants(child.pid or 0)) == 1)
        left = descendants(child.pid)
        assert left[0].session == left[0].pid  # a session leader, like the engine
        await child.stop()  # the group dies; the grandchild (another session) does not
        assert proc_info(left[0].pid) is not None
        assert kill_leftovers(left) == left
        await _until(lambda: proc_info(left[0].pid) is None)
        assert kill_leftovers(left) == []
    finally:
        kill_leftovers(left)
        await child.stop()
