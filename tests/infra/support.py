"""Helpers for the infra tests: render the chart per values file, and look objects up."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from core.app import CoreMetrics
from edge.metrics import EdgeMetrics
from shared.prom import ScrapedCounter

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
CHART = INFRA / "helm" / "edgecore"
VALUES = sorted((INFRA / "helm" / "values").glob("*.yaml"))
DASHBOARDS = CHART / "files" / "dashboards"
KUBE_VERSION = "1.30.0"  # the oldest minor the chart targets that kubernetes-validate ships

# Custom resources: not in Kubernetes' own schemas, checked structurally below instead.
CRDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("cert-manager.io/v1", "Certificate"),
}

# vLLM's own metric families used by the core dashboard and the alerts (vLLM V1 names, as in
# vllm/v1/metrics/loggers.py and vllm/v1/spec_decode/metrics.py of vLLM 0.32): queue and
# batch (sizing GPUs), KV cache (preemption risk), latency histograms (what the core adds),
# token counters (throughput vs. the capacity worksheet), prefix cache and EAGLE-3
# acceptance (whether the profile's features pay off).
VLLM_METRICS = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:num_preemptions": "counter",
    "vllm:prompt_tokens": "counter",
    "vllm:generation_tokens": "counter",
    "vllm:request_success": "counter",
    "vllm:prefix_cache_queries": "counter",
    "vllm:prefix_cache_hits": "counter",
    "vllm:spec_decode_num_draft_tokens": "counter",
    "vllm:spec_decode_num_accepted_tokens": "counter",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
}
# Prometheus writes `up` for every scrape target itself.
PROMETHEUS_METRICS = {"up"}


# The tools come with the dev extra; a test that needs a missing one skips, saying which.
def _helm() -> Any:
    return pytest.importorskip("helm_python", reason="helm-python-sdk (dev extra) not installed")


def _kubernetes_validate() -> Any:
    return pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate (dev extra) not installed"
    )


def _promql() -> Any:
    return pytest.importorskip("promql_parser", reason="promql-parser (dev extra) not installed")


# --- rendering ---------------------------------------------------------------------------


def release_for(values_file: Path) -> str:
    # A second release beside `edgecore` in the same namespace (see the file's header).
    return "edgecore-long" if values_file.stem.endswith("-long-context") else "edgecore"


DEV_SECRETS = {
    "secrets": {
        "create": True,
        "keysToml": '[tenants.ci]\nkeys = ["sha256:00"]\n',
        "adminKeys": ["sha256:11"],
        "redisPassword": "ci-only",
        "coreToken": "ci-core-token",
        "coreAdminKey": "ci-core-admin",
        "engineApiKey": "ci-engine-key",
    }
}


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


@cache
def _chart() -> Any:
    return _helm().Chart.load(str(CHART))


def render(values: dict[str, Any], release: str = "edgecore") -> list[dict[str, Any]]:
    files = _chart().render(values, name=release, namespace="edgecore", is_install=True)
    docs: list[dict[str, Any]] = []
    for text in files.values():
        docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


@cache
def rendered_cases() -> dict[str, list[dict[str, Any]]]:
    """Every values file, plus the defaults, plus all optional objects switched on."""
    cases = {"defaults": render({})}
    for path in VALUES:
        values = yaml.safe_load(path.read_text())
        cases[path.stem] = render(values, release_for(path))
        cases[path.stem + "+secrets"] = render(_merge(values, DEV_SECRETS), release_for(path))
    everything = {
        "edge": {"hpa": {"queueMetric": {"enabled": True}}},
        "autoscaling": {"keda": {"enabled": True}},
        "mtls": {"enabled": True, "coreDnsNames": ["core.eu-west-1.edgecore.internal"]},
    }
    eu = yaml.safe_load((INFRA / "helm/values/eu-west-1.yaml").read_text())
    cases["eu-west-1+all-options"] = render(_merge(_merge(eu, DEV_SECRETS), everything))
    long = yaml.safe_load((INFRA / "helm/values/us-east-1-long-context.yaml").read_text())
    cases["us-east-1-long-context+all-options"] = render(
        _merge(_merge(long, DEV_SECRETS), everything), "edgecore-long"
    )
    return cases


def objects(kind: str, case: str) -> list[dict[str, Any]]:
    return [d for d in rendered_cases()[case] if d["kind"] == kind]


def all_docs() -> list[tuple[str, dict[str, Any]]]:
    return [(case, d) for case, docs in rendered_cases().items() for d in docs]


def _container(workload: dict[str, Any], name: str) -> dict[str, Any]:
    (c,) = [c for c in workload["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    return c


def _config_map(case: str, name: str) -> dict[str, str]:
    (cm,) = [c for c in objects("ConfigMap", case) if c["metadata"]["name"] == name]
    data: dict[str, str] = cm["data"]
    return data


def _secret_refs(container: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """env name -> (secret, key) for the container's secretKeyRef variables."""
    out = {}
    for env in container.get("env", []):
        ref = env.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            out[env["name"]] = (ref["name"], ref["key"])
    return out


def _engine_api_pods(case: str) -> list[dict[str, Any]]:
    """Pod templates (with metadata) of the engine pods that serve vLLM's API."""
    pods = [s["spec"]["template"] for s in objects("StatefulSet", case)
            if s["metadata"]["name"].endswith("-engine")]  # fmt: skip
    for lws in objects("LeaderWorkerSet", case):
        leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
        # LeaderWorkerSet labels the leader worker-index 0 (the template does not say so).
        labels = {**leader["metadata"]["labels"], "leaderworkerset.sigs.k8s.io/worker-index": "0"}
        pods.append({**leader, "metadata": {**leader["metadata"], "labels": labels}})
    return pods


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        if expr["operator"] == "DoesNotExist" and expr["key"] in labels:
            return False
    return True


def _sample_names(registry_owner: Any) -> set[str]:
    # Touch one child of every labelled metric so it is exposed, then read the exposition
    # back: the names Prometheus really scrapes (_total, _bucket, _sum, _count, _created).
    for value in vars(registry_owner).values():
        if isinstance(value, MetricWrapperBase) and value._labelnames:
            value.labels(*["x"] * len(value._labelnames))
        elif isinstance(value, ScrapedCounter) and value.labelnames:
            value.set(0, *["x"] * len(value.labelnames))
    text = generate_latest(registry_owner.registry).decode()
    return {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}


def _family_samples(families: dict[str, str]) -> set[str]:
    suffixes = {"gauge": [""], "counter": ["_total", "_created"],
                "histogram": ["_bucket", "_sum", "_count", "_created"]}  # fmt: skip
    return {name + s for name, kind in families.items() for s in suffixes[kind]}


@cache
def exported() -> dict[str, set[str]]:
    return {
        "edge": _sample_names(EdgeMetrics.create()),
        "core": _sample_names(CoreMetrics.create()),
        "vllm": _family_samples(VLLM_METRICS),
    }


GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def metric_names(expr: str) -> set[str]:
    for var, value in GRAFANA_VARS.items():
        expr = expr.replace(var, value)
    promql = _promql()
    tree = promql.parse(expr)  # raises on invalid PromQL
    names: set[str] = set()

    def visit(node: Any) -> bool:
        if isinstance(node, promql.VectorSelector):
            names.add(
                node.name or next(m.value for m in node.matchers.matchers if m.name == "__name__")
            )
        return True

    promql.walk(tree, visit)
    return names
