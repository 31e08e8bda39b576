"""Settings (shared.settings): sections set by their nested names only, the old flat names
still read for one release with a deprecation warning, one meaning per field, and the
fields both services have in one base."""

from __future__ import annotations

import logging
import warnings

import pytest
from pydantic import BaseModel

from core.settings import CoreSettings
from edge.settings import EdgeSettings
from shared.settings import ServerSettings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for name in list(os.environ):
        if name.startswith(("EDGECORE_EDGE_", "EDGECORE_CORE_")):
            monkeypatch.delenv(name)
    return monkeypatch


def test_old_flat_names_still_work_with_a_deprecation_warning(
    clean_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clean_env.setenv("EDGECORE_EDGE_CACHE_TTL_S", "77")
    clean_env.setenv("EDGECORE_EDGE_EDGE_THREADS", "3")
    clean_env.setenv("EDGECORE_EDGE_CORE_SATURATION_S", "4.5")
    clean_env.setenv("EDGECORE_EDGE_CORES", '[{"url": "http://a:1", "priority": 1}]')
    clean_env.setenv("EDGECORE_EDGE_MAX_MESSAGES", "9")
    clean_env.setenv("EDGECORE_EDGE_REDIS_URL", "redis://r:1/0")
    clean_env.setenv("EDGECORE_EDGE_EMBED_THREADS", "2")
    with warnings.catch_warnings(record=True) as seen, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        s = EdgeSettings()
    assert s.cache.ttl_s == 77 and s.local.threads == 3 and s.route.saturation_s == 4.5
    assert [c.url for c in s.core_specs()] == ["http://a:1"] and s.limits.max_messages == 9
    assert s.redis.url == "redis://r:1/0" and s.embed.threads == 2
    said = [str(w.message) for w in seen if w.category is DeprecationWarning]
    assert len(said) == 7
    assert any("EDGECORE_EDGE_EDGE_THREADS" in m and "EDGECORE_EDGE_LOCAL__THREADS" in m
               for m in said)  # fmt: skip
    assert "set EDGECORE_EDGE_REDIS__URL" in caplog.text  # ops read logs, not warnings


def test_the_core_reads_its_old_flat_names_too(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("EDGECORE_CORE_QUEUE_BATCH", "7")
    clean_env.setenv("EDGECORE_CORE_ENGINE_HEALTH_TIMEOUT_S", "9")
    clean_env.setenv("EDGECORE_CORE_ENGINE_PROGRESS_TIMEOUT_S", "0")
    clean_env.setenv("EDGECORE_CORE_ENGINE_DISCOVERY", "pods.local")
    clean_env.setenv("EDGECORE_CORE_POOL_FILE", "/etc/pool.toml")
    with pytest.warns(DeprecationWarning, match="EDGECORE_CORE_ADMISSION__QUEUE_BATCH"):
        s = CoreSettings()
    assert s.admission.queue_batch == 7 and s.health.timeout_s == 9
    assert s.health.progress_timeout_s == 0 and s.discovery.dns_name == "pods.local"
    assert str(s.pool.file) == "/etc/pool.toml"


def test_nested_names_win_over_flat_ones(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("EDGECORE_EDGE_CACHE_TTL_S", "77")
    clean_env.setenv("EDGECORE_EDGE_CACHE__TTL_S", "88")
    clean_env.setenv("EDGECORE_EDGE_ROUTE__POLICY", "edge")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        s = EdgeSettings()
    assert s.cache.ttl_s == 88 and s.route.policy == "edge"


def test_nested_names_are_read_without_a_warning(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("EDGECORE_EDGE_EMBED__MAX_BATCH", "8")
    clean_env.setenv("EDGECORE_CORE_HEALTH__CANARY_IDLE_S", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert EdgeSettings().embed.max_batch == 8
        assert CoreSettings().health.canary_idle_s == 0


def test_keyword_arguments_take_nested_names() -> None:
    s = EdgeSettings(cache__candidate_floor=0.5, core__url="http://c:2", local__max_new_tokens=7)
    assert s.cache.candidate_floor == 0.5 and s.core.url == "http://c:2"
    assert s.local.max_new_tokens == 7
    c = CoreSettings(admission__queue_batch=3, pool__replicas=2)
    assert c.admission.queue_batch == 3 and c.pool.replicas == 2


@pytest.mark.parametrize("model", [EdgeSettings, CoreSettings])
def test_every_old_flat_name_maps_to_one_section_field(model: type[ServerSettings]) -> None:
    names = model.legacy_names()
    fields = {
        (section, name)
        for section, old in model.legacy.items()
        for name in type(getattr(model(), section)).model_fields
        if name not in old.new
    }
    assert set(names.values()) == fields and len(names) == len(fields)
    for flat in names:  # no flat name is also a field of its own
        assert flat not in model.model_fields


def test_both_services_share_the_server_fields() -> None:
    shared = set(ServerSettings.model_fields)
    assert {"host", "port", "home", "profile", "tls_certfile", "retry_after_s"} <= shared
    for model in (EdgeSettings, CoreSettings):
        assert issubclass(model, ServerSettings)
        assert shared <= set(model.model_fields)
    assert (EdgeSettings().port, CoreSettings().port) == (8080, 8090)


def test_retry_after_and_the_redis_back_off_are_two_settings(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("EDGECORE_EDGE_RETRY_AFTER_S", "9")
    s = EdgeSettings()
    assert s.retry_after_s == 9 and s.redis.backoff_s == 5.0
    clean_env.setenv("EDGECORE_EDGE_REDIS__BACKOFF_S", "1")
    assert EdgeSettings().redis.backoff_s == 1.0


def test_sections_are_models_the_components_take_whole() -> None:
    for model in (EdgeSettings, CoreSettings):
        for section in model.sections():
            assert issubclass(type(getattr(model(), section)), BaseModel)
    assert set(EdgeSettings.sections()) >= {"cache", "route", "core", "local", "limits",
                                            "embed", "redis"}  # fmt: skip
    assert set(CoreSettings.sections()) >= {"engine", "pool", "admission", "health",
                                            "discovery"}  # fmt: skip


def test_a_json_request_gets_time_for_its_whole_answer() -> None:
    from edge.upstream.cores import Timeouts

    t = Timeouts(connect_s=1, first_byte_s=10, idle_s=5, first_byte_per_1k_chars_s=1,
                 unary_per_token_s=0.1, unary_default_tokens=100)  # fmt: skip
    assert t.first_byte_for(2000, {"stream": True, "max_tokens": 500}) == 12
    assert t.first_byte_for(2000, {"max_tokens": 500}) == 62
    assert t.first_byte_for(0, {}) == 20  # no max_tokens: the default allowance


def test_with_cache_changes_the_section_that_is_read() -> None:
    settings = EdgeSettings()
    changed = settings.with_cache(cross_encoder=False, false_hit_budget=0.05)
    assert (changed.cache.cross_encoder, changed.cache.false_hit_budget) == (False, 0.05)
    assert settings.cache.cross_encoder is True  # a copy
    assert changed.route == settings.route


def test_thread_pools_default_to_the_cpus_the_process_may_use(
    clean_env: pytest.MonkeyPatch,
) -> None:
    from shared.cpus import usable_cpus

    s = EdgeSettings()
    assert s.embed.worker_count() == usable_cpus() == s.cache.match_workers()
    clean_env.setenv("EDGECORE_EDGE_EMBED__WORKERS", "3")
    clean_env.setenv("EDGECORE_EDGE_CACHE__MATCH_THREADS", "5")
    s = EdgeSettings()
    assert (s.embed.worker_count(), s.cache.match_workers()) == (3, 5)
