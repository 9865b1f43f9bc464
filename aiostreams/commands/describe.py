"""``aiostreams describe MODULE:APP``: the app's topology (Kafka Streams' ``describe()``
shape, or Mermaid with ``--mermaid``) under a short header naming the app, its broker and
the settings it sets. Secret settings print as ``**********``."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from aiostreams.app import App


def describe_app(app: App) -> str:
    settings = app.settings
    lines = [f"App: {app.name}", f"Broker: {settings.broker}"]
    chosen = sorted(key for key in settings.model_fields_set if key != "broker")
    if chosen:
        lines.append("Settings: " + ", ".join(
            f"{key}={_show(getattr(settings, key))}" for key in chosen))
    topics = app.topology.topics
    if topics:
        lines.append("Topics:")
        for name, topic in sorted(topics.items()):
            layout = (f"{topic.partitions} partition(s)" if topic.partitions
                      else "partitions not declared")
            lines.append(f"  {name}: key {topic.key_serde!r}, value {topic.value_serde!r}, "
                         f"{layout}{', internal' if topic.internal else ''}")
    lines.append("")
    lines.append(app.topology.describe())
    return "\n".join(lines)


def _show(value: object) -> str:
    if isinstance(value, SecretStr):
        return str(value)  # '**********'
    if isinstance(value, Path):
        return str(value)
    return repr(value)
