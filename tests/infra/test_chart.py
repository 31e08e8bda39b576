"""The chart renders, lints and validates; its engines are the pool profiles; its env names
are real settings; its services, policies and monitors are wired."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.profiles import load_profile, profile_names
from core.settings import CoreSettings, EngineConfig
from edge.settings import EdgeSettings
from tests.infra.support import (
    CHART,
    CRDS,
    INFRA,
    KUBE_VERSION,
    VALUES,
    _helm,
    _kubernetes_validate,
    _selects,
    all_docs,
    objects,
    release_for,
    rendered_cases,
)


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
        assert settings["core"]["cores"], path.name
        for core in settings["core"]["cores"]:
            owners = [model for key, model in served.items() if key in core["url"]]
            assert owners == [settings["core_model"]], (path.name, core["url"])


# --- env names = settings fields ---------------------------------------------------------

# A wildcard such as EDGECORE_CORE_ENGINE__* matches as its prefix (a real field too).
ENV_NAME = re.compile(r"EDGECORE_(EDGE|CORE)_([A-Z0-9]+(?:__?[A-Z0-9]+)*)")


def _valid_setting(service: str, rest: str) -> bool:
    model: Any = EdgeSettings if service == "EDGE" else CoreSettings
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
    assert "EDGECORE_EDGE_CORE__CORES" in names and "EDGECORE_CORE_ENGINE__HOST" in names
    bad = sorted(n for n in names if not _valid_setting(*ENV_NAME.fullmatch(n).groups()))  # type: ignore[union-attr]
    assert not bad, f"not settings fields: {bad}"


def test_values_settings_keys_are_fields() -> None:
    for path in [CHART / "values.yaml", *VALUES]:
        values = yaml.safe_load(path.read_text())
        for service, model in (("edge", EdgeSettings), ("core", CoreSettings)):
            for key, value in (values.get(service, {}).get("settings", {}) or {}).items():
                assert key in model.model_fields, (path.name, key)
                if key in model.sections():  # a section: a map of its own fields
                    inner = model.model_fields[key].annotation
                    assert isinstance(value, dict) and set(value) <= set(inner.model_fields), (
                        path.name, key, value,
                    )  # fmt: skip


# --- wiring: services, policies, monitors ------------------------------------------------


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
