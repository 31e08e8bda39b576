"""Prometheus counters whose value lives elsewhere (a pool's tallies, a model's count).

A count that only grows is a Counter (``rate()`` and ``increase()`` handle its resets), even
when the process keeps it in its own field rather than in a ``prometheus_client.Counter``.
``ScrapedCounter`` exposes such a count as a counter family: set from a callback (no labels)
or copied in at scrape time, label values by label values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector


class ScrapedCounter(Collector):
    """A counter family (``NAME_total``) whose samples are read, never incremented here."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        registry: CollectorRegistry,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._values: dict[tuple[str, ...], float] = {}
        self._function: Callable[[], float] | None = None
        registry.register(self)

    def set_function(self, function: Callable[[], float]) -> None:
        """Read the (unlabelled) count from ``function`` at every scrape."""
        if self.labelnames:
            raise ValueError(f"{self.name}: set_function is for unlabelled counters")
        self._function = function

    def set(self, value: float, *labelvalues: str) -> None:
        """The count now, for these label values (copied in at scrape time)."""
        if len(labelvalues) != len(self.labelnames):
            raise ValueError(f"{self.name}: expected labels {self.labelnames}")
        self._values[tuple(labelvalues)] = float(value)

    def _samples(self) -> Iterable[tuple[tuple[str, ...], float]]:
        if self._function is not None:
            return [((), float(self._function()))]
        if not self.labelnames and not self._values:
            return [((), 0.0)]  # an unlabelled count starts at zero, as a Counter does
        return list(self._values.items())

    def describe(self) -> Iterable[Metric]:
        return [CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labelvalues, value in self._samples():
            family.add_metric(list(labelvalues), value)
        yield family
