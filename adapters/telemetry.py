"""The telemetry a server keeps, as observers of its runs: Prometheus metrics wherever
prometheus_client is installed (served at /metrics), OpenTelemetry spans when asked for."""

from __future__ import annotations

from runpoint.adapters import metrics


def observers(*, traces: bool = False) -> list[object]:
    """The plugins that keep them, for a `PluginHost`."""
    found: list[object] = []
    if metrics.installed():
        found.append(metrics.Metrics())
    if traces:
        from runpoint.adapters import tracing

        found.append(tracing.Tracing(tracing.provider_from_env()))
    return found
