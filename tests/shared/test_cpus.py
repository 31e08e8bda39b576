"""A container's CPU limit caps the thread pools sized from the CPUs (``shared.cpus``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.cpus import cpu_limit, usable_cpus


def _v2(root: Path, text: str) -> Path:
    (root / "cpu.max").write_text(text)
    return root


def _v1(root: Path, quota: str, period: str = "100000") -> Path:
    (root / "cpu").mkdir()
    (root / "cpu" / "cpu.cfs_quota_us").write_text(quota + "\n")
    (root / "cpu" / "cpu.cfs_period_us").write_text(period + "\n")
    return root


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("200000 100000\n", 2), ("150000 100000", 2), ("50000 100000", 1), ("max 100000", None)],
)
def test_a_cgroup_v2_limit_is_read_and_rounded_up(
    tmp_path: Path, text: str, cpus: int | None
) -> None:
    assert cpu_limit(_v2(tmp_path, text)) == cpus


@pytest.mark.parametrize(("quota", "cpus"), [("300000", 3), ("-1", None)])
def test_a_cgroup_v1_quota_is_read(tmp_path: Path, quota: str, cpus: int | None) -> None:
    assert cpu_limit(_v1(tmp_path, quota)) == cpus


def test_no_cgroup_files_is_no_limit(tmp_path: Path) -> None:
    assert cpu_limit(tmp_path) is None
    assert usable_cpus(tmp_path) >= 1


def test_the_limit_caps_the_affinity(tmp_path: Path) -> None:
    unlimited = usable_cpus(tmp_path)
    assert usable_cpus(_v2(tmp_path, "100000 100000")) == 1
    assert usable_cpus(_v2(tmp_path, f"{(unlimited + 8) * 100000} 100000")) == unlimited
