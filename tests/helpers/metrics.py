"""The broker's Prometheus endpoint read as Prometheus reads it (rmq.broker.metrics)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import LOOPBACK


def scrape(port: int, families: set[str] | None = None) -> dict[str, list]:
    """name -> samples of ``GET /metrics``; the families' names go to ``families``."""
    with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        if families is not None:
            families.add(family.name)
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    return samples


def value(samples: dict[str, list], name: str, **labels: str) -> float:
    found = [s.value for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, f"{name}{labels}: {found} in {samples.get(name)}"
    return found[0]
