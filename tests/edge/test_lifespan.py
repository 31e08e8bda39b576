"""What the edge's lifespan sets up for the process, and gives back when it stops."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient
from threadpoolctl import threadpool_info

from edge.app import create_app
from edge.settings import EdgeSettings
from tests.conftest import free_port


def blas_threads() -> list[int]:
    return [int(p["num_threads"]) for p in threadpool_info() if p["user_api"] == "blas"]


def test_lifespan_limits_blas_threads_and_restores_them(models_dir: Path) -> None:
    # Spinning OpenBLAS workers on a 2-core edge took CPU from the embedder and the event
    # loop for a product of ~1 ms (the verifier's first layer); the limit is process-wide.
    before = blas_threads()
    settings = EdgeSettings(
        models_dir=models_dir,
        core__url=f"http://127.0.0.1:{free_port()}",
        redis__url=f"redis://127.0.0.1:{free_port()}/0",
        blas_threads=1,
    )
    with TestClient(create_app(settings)) as client:
        assert client.get("/healthz").status_code == 200
        assert blas_threads() and set(blas_threads()) == {1}
    assert blas_threads() == before
