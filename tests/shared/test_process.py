"""A supervised child's descendants' CPU time (``ChildProcess.children_cpu_s``): what the
core's progress watch reads to tell a slow engine from a wedged one. Real processes."""

from __future__ import annotations

import asyncio
import sys

from shared.process import ChildProcess

# A parent that waits (as vLLM's API server does) on a child that spins, or sleeps.
PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
child.wait()
"""
SPIN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass"
SLEEP = "import time; time.sleep(30)"


async def cpu_over(code: str, seconds: float) -> float:
    """CPU seconds the descendants used in ``seconds``, counted once the child is up."""
    child = ChildProcess("parent", [sys.executable, "-c", PARENT, code])
    await child.start()
    try:
        first = None
        for _ in range(100):  # the grandchild is up once it can be read
            first = child.children_cpu_s()
            if first is not None:
                break
            await asyncio.sleep(0.05)
        assert first is not None
        await asyncio.sleep(seconds)
        later = child.children_cpu_s()
        assert later is not None
        return later - first
    finally:
        await child.stop(timeout=1.0)


def test_a_spinning_child_is_seen_computing_and_a_sleeping_one_is_not() -> None:
    assert asyncio.run(cpu_over(SPIN, 1.0)) > 0.25
    assert asyncio.run(cpu_over(SLEEP, 1.0)) < 0.1


def test_no_process_no_reading() -> None:
    assert ChildProcess("never", [sys.executable, "-c", "pass"]).children_cpu_s() is None
