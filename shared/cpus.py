"""How many CPUs this process may use: its affinity, capped by a container's CPU limit.

A pod's CPU limit is a cgroup quota, not an affinity: ``os.sched_getaffinity`` still
reports every CPU of the node. Thread pools sized from it (the edge's embedder and
matcher) would start one thread per node CPU on a pod limited to two, and be throttled.
Go (1.25) and the JVM read the quota the same way.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def usable_cpus(cgroup: Path = CGROUP) -> int:
    """The CPUs this process may use: its affinity, at most its cgroup's CPU limit."""
    if hasattr(os, "sched_getaffinity"):
        cpus = len(os.sched_getaffinity(0))
    else:
        cpus = os.cpu_count() or 1
    limit = cpu_limit(cgroup)
    return min(cpus, limit) if limit is not None else cpus


def cpu_limit(cgroup: Path = CGROUP) -> int | None:
    """The cgroup's CPU limit rounded up (cgroup v2 ``cpu.max``, or v1's
    ``cpu.cfs_quota_us`` and ``cpu.cfs_period_us``), or None where there is none."""
    try:
        if (v2 := cgroup / "cpu.max").exists():
            quota, _, period = v2.read_text().strip().partition(" ")
        elif (v1 := cgroup / "cpu" / "cpu.cfs_quota_us").exists():
            quota = v1.read_text().strip()
            period = (cgroup / "cpu" / "cpu.cfs_period_us").read_text().strip()
        else:
            return None
        q, p = int(quota), int(period)
    except (OSError, ValueError):  # "max" (no limit), or nothing readable
        return None
    return max(1, math.ceil(q / p)) if q > 0 and p > 0 else None
