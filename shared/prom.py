"""Declaring Prometheus metrics on a registry of one's own (``Declare``), and counters whose
value lives elsewhere (a pool's tallies, a model's count).

``Declare`` spells each metric on one line, name, help and labels, so that the edge's and the
core's tables read alike and say nothing twice (the registry, the label list's type).

A count that only grows is a Counter (``rate()`` and ``increase()`` handle its resets), even
when the process keeps it in its own field rather than in a ``prometheus_client.Counter``.
``ScrapedCounter`` exposes such a count as a counter family: set from a callback (no labels)
or copied in at scrape time, label values by label values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
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


class Declare:
    """Metrics declared on ``registry`` (a fresh one by default): ``counter``, ``gauge`` and
    ``histogram`` are prometheus_client's, ``scraped`` a ``ScrapedCounter``; label names
    follow the help text."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()

    def counter(self, name: str, documentation: str, *labels: str) -> Counter:
        return Counter(name, documentation, labels, registry=self.registry)

    def gauge(self, name: str, documentation: str, *labels: str) -> Gauge:
        return Gauge(name, documentation, labels, registry=self.registry)

    def histogram(
        self, name: str, documentation: str, *labels: str, buckets: Sequence[float]
    ) -> Histogram:
        return Histogram(name, documentation, labels, buckets=buckets, registry=self.registry)

    def scraped(self, name: str, documentation: str, *labels: str) -> ScrapedCounter:
        return ScrapedCounter(name, documentation, labels, registry=self.registry)
