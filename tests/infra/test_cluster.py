"""Cluster wiring: engine discovery, secrets and mTLS, KEDA, pod security, the values schema."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest
import yaml

from core.settings import CoreSettings
from tests.infra.support import (
    CHART,
    INFRA,
    KUBE_VERSION,
    VALUES,
    _config_map,
    _container,
    _engine_api_pods,
    _helm,
    _merge,
    _secret_refs,
    _selects,
    all_docs,
    exported,
    metric_names,
    objects,
    release_for,
    render,
    rendered_cases,
)

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
    name = data["EDGECORE_CORE_DISCOVERY__DNS_NAME"]
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
    assert settings.discovery.dns_name == name and settings.profile == "prod"
    template = template_from(load_pool(settings))
    assert template.max_in_flight == seqs and not template.manage
    assert template.api_key is not None


def test_discovery_off_leaves_the_service_address() -> None:
    eu = yaml.safe_load((INFRA / "helm/values/eu-west-1.yaml").read_text())
    docs = render(_merge(eu, {"core": {"engineDiscovery": {"enabled": False}}}))
    (cm,) = [d for d in docs if d["metadata"]["name"] == "edgecore-core-settings"]
    assert "EDGECORE_CORE_DISCOVERY__DNS_NAME" not in cm["data"]
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
    assert _secret_refs(edge)["EDGECORE_EDGE_CORE__TOKEN"] == core_refs["EDGECORE_CORE_AUTH_TOKEN"]
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
    assert edge_env["EDGECORE_EDGE_CORE__CLIENT_CERTFILE"].startswith("/etc/edgecore/core-client/")
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


def test_images_are_pinned_by_digest_when_given() -> None:
    digest = "sha256:" + "ab" * 32
    eu = yaml.safe_load((INFRA / "helm/values/eu-west-1.yaml").read_text())
    pinned = {"images": {"core": {"repository": "r/core", "tag": "0.1.0", "digest": digest}}}
    images = {
        c["image"]
        for d in render(_merge(eu, pinned))
        for c in d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
        + d.get("spec", {}).get("leaderWorkerTemplate", {}).get("workerTemplate", {})
        .get("spec", {}).get("containers", [])
    }  # fmt: skip
    assert f"r/core:0.1.0@{digest}" in images


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
        (
            {"images": {"core": {"repository": "r", "tag": "1", "digest": "latest"}}},
            "/images/core/digest",
        ),
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
