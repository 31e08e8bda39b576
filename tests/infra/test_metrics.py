"""Dashboards and alerts use only metric names the edge, core and vLLM export."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.infra.support import (
    DASHBOARDS,
    INFRA,
    PROMETHEUS_METRICS,
    VLLM_METRICS,
    exported,
    metric_names,
    objects,
)

# --- metrics: dashboards and alerts only use what is exported ----------------------------


def test_exported_names_include_suffixes() -> None:
    names = exported()
    assert "edgecore_edge_requests_total" in names["edge"]
    assert "gen_ai_server_time_to_first_token_seconds_bucket" in names["edge"]
    assert "edgecore_core_requests_total" in names["core"]
    # Token usage is a histogram (OTel's gen_ai.client.token.usage), counts only grow:
    # counters, also those copied from the pool at scrape time.
    assert "gen_ai_client_token_usage_bucket" in names["edge"]
    for name in ("edgecore_edge_model_cancelled", "edgecore_core_failovers"):
        assert f"{name}_total" in names["edge"] and name not in names["edge"]
    for name in ("edgecore_core_admitted", "edgecore_core_rejected", "edgecore_core_affinity",
                 "edgecore_core_drain_evicted", "edgecore_core_replica_restarts"):  # fmt: skip
        assert f"{name}_total" in names["core"] and name not in names["core"]


def _dashboard_exprs(path: Path) -> list[str]:
    board = json.loads(path.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    exprs += [
        re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", v["query"])
        for v in board["templating"]["list"]
        if v["type"] == "query"
    ]
    return exprs


@pytest.mark.parametrize(
    ("board", "sources"),
    [("edgecore-edge.json", ("edge",)), ("edgecore-core.json", ("core", "vllm"))],
)
def test_dashboards_reference_only_exported_metrics(board: str, sources: tuple[str, ...]) -> None:
    allowed = set().union(*(exported()[s] for s in sources))
    exprs = _dashboard_exprs(DASHBOARDS / board)
    assert len(exprs) > 10
    used = set().union(*(metric_names(e) for e in exprs))
    assert not used - allowed, f"{board}: not exported: {sorted(used - allowed)}"


def _alert_rules() -> list[dict[str, Any]]:
    (rule,) = objects("PrometheusRule", "eu-west-1")
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def _runbook_anchors() -> set[str]:
    text = (INFRA.parent / "docs" / "operations.md").read_text()  # the runbook
    anchors = set()
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


def test_alerts_use_exported_metrics_and_link_the_runbook() -> None:
    allowed = set().union(*exported().values()) | PROMETHEUS_METRICS
    anchors = _runbook_anchors()
    rules = _alert_rules()
    assert len(rules) >= 10
    for rule in rules:
        name = rule["alert"]
        used = metric_names(rule["expr"])
        assert used and not used - allowed, f"{name}: not exported: {sorted(used - allowed)}"
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, name
        assert rule["annotations"]["summary"], name
        url = rule["annotations"]["runbook_url"]
        assert url.startswith("https://") and "#" in url, name
        assert url.split("#", 1)[1] == name.lower() and name.lower() in anchors, name


def test_vllm_metric_names_exist_in_vllm() -> None:
    spec = importlib.util.find_spec("vllm")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("vllm is not installed (core-cpu extra): vLLM names checked by list only")
    root = Path(next(iter(spec.submodule_search_locations)))
    source = "".join(
        p.read_text()
        for p in [root / "v1/metrics/loggers.py", root / "v1/spec_decode/metrics.py"]
        if p.exists()
    )
    missing = [name for name in VLLM_METRICS if f'"{name}"' not in source]
    assert not missing, f"vLLM does not define {missing}"
