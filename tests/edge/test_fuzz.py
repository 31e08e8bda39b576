"""A bounded schemathesis run against a real edge: no 5xx, no crash, responses match
the published schema. The edge answers with its model capped at a few tokens so the run
stays short; it has no core, and the fuzzing tenant may not name the core's model (403),
so every 5xx would be a real bug."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Keys, free_port, start_edge

pytestmark = pytest.mark.slow

EXAMPLES = 40  # per operation


@pytest.fixture(scope="module")
def fuzz_edge(models_dir: Path, log_dir: Path, redis_url: str, keys: Keys) -> Iterator[str]:
    server = start_edge(
        "edge-fuzz", log_dir, models_dir, redis__url=redis_url, keys_file=str(keys.file),
        core__url=f"http://127.0.0.1:{free_port()}", route__policy="edge",
        local__max_new_tokens="4", core__unavailable_policy="503",
    )  # fmt: skip
    yield server.url
    server.stop()


def test_openapi_document_describes_the_public_api(fuzz_edge: str) -> None:
    doc = httpx.get(fuzz_edge + "/openapi.json").json()
    assert {"/v1/chat/completions", "/v1/models", "/healthz", "/readyz"} <= set(doc["paths"])
    chat = doc["paths"]["/v1/chat/completions"]["post"]
    assert {"200", "400", "401", "404", "413", "429", "503"} <= set(chat["responses"])


def test_schemathesis_finds_no_server_errors(fuzz_edge: str, keys: Keys, tmp_path: Path) -> None:
    junit = tmp_path / "fuzz.xml"
    argv = [
        sys.executable, "-m", "schemathesis.cli", "run", fuzz_edge + "/openapi.json",
        "--checks", "not_a_server_error,response_schema_conformance,status_code_conformance,"
        "content_type_conformance",
        "--max-examples", str(EXAMPLES), "--generation-deterministic",
        "--header", f"Authorization: Bearer {keys.fuzz}",
        "--request-timeout", "60", "--workers", "1",
        "--report", "junit", "--report-junit-path", str(junit),
    ]  # fmt: skip
    run = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    summary = run.stdout[-6000:]
    print(summary)
    assert run.returncode == 0, summary + run.stderr[-2000:]
    (tmp_path / "summary.json").write_text(json.dumps({"stdout": summary}))
