"""Edge settings: sections passed whole to their components, flat names still accepted."""

from __future__ import annotations

import pytest

from edge.settings import EdgeSettings, legacy_names


def test_flat_names_keep_working(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGECORE_EDGE_CACHE_TTL_S", "77")
    monkeypatch.setenv("EDGECORE_EDGE_EDGE_THREADS", "3")
    monkeypatch.setenv("EDGECORE_EDGE_CORE_SATURATION_S", "4.5")
    monkeypatch.setenv("EDGECORE_EDGE_CORES", '[{"url": "http://a:1", "priority": 1}]')
    monkeypatch.setenv("EDGECORE_EDGE_MAX_MESSAGES", "9")
    s = EdgeSettings()
    assert s.cache.ttl_s == 77 and s.local.threads == 3 and s.route.saturation_s == 4.5
    assert [c.url for c in s.core_specs()] == ["http://a:1"] and s.limits.max_messages == 9


def test_nested_names_win_over_flat_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGECORE_EDGE_CACHE_TTL_S", "77")
    monkeypatch.setenv("EDGECORE_EDGE_CACHE__TTL_S", "88")
    monkeypatch.setenv("EDGECORE_EDGE_ROUTE__POLICY", "edge")
    s = EdgeSettings()
    assert s.cache.ttl_s == 88 and s.route.policy == "edge"


def test_keyword_arguments_take_flat_names_too() -> None:
    s = EdgeSettings(cache_candidate_floor=0.5, core_url="http://c:2", edge_max_new_tokens=7)
    assert s.cache.candidate_floor == 0.5 and s.core.url == "http://c:2"
    assert s.local.max_new_tokens == 7


def test_every_section_field_has_one_flat_name() -> None:
    names = legacy_names()
    fields = {
        (section, name)
        for section in ("cache", "route", "core", "local", "limits")
        for name in type(getattr(EdgeSettings(), section)).model_fields
    }
    assert set(names.values()) == fields and len(names) == len(fields)
    assert names["cache_ttl_s"] == ("cache", "ttl_s") and names["cores"] == ("core", "cores")


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
