"""Which priority class and queue deadline a request gets, from its headers and body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.admission import PRIORITIES, Priority
from core.settings import AdmissionSettings

PRIORITY_HEADER = "x-edgecore-priority"  # interactive | batch
TENANT_HEADER = "x-edgecore-tenant"
DEADLINE_HEADER = "x-edgecore-deadline-ms"  # the caller's own limit on waiting for a replica
SESSION_HEADER = "x-edgecore-session"  # explicit conversation id for replica affinity


def priority_of(
    headers: Mapping[str, str], payload: Mapping[str, Any], s: AdmissionSettings
) -> Priority:
    """Header first; then OpenAI's ``service_tier: "flex"`` (cheap, may wait); then the
    tenant's class; interactive otherwise."""
    named = headers.get(PRIORITY_HEADER, "").strip().lower()
    for p in PRIORITIES:
        if named == p:
            return p
    if payload.get("service_tier") == "flex":
        return "batch"
    if headers.get(TENANT_HEADER) in s.batch_tenants:
        return "batch"
    return "interactive"


def queue_timeout(headers: Mapping[str, str], s: AdmissionSettings) -> float:
    """Seconds a request may wait for a replica: the setting, or less if the caller asks."""
    raw = headers.get(DEADLINE_HEADER)
    if raw:
        try:
            ms = float(raw)
        except ValueError:
            return s.queue_timeout_s
        if ms > 0:
            return min(s.queue_timeout_s, ms / 1000.0)
    return s.queue_timeout_s
