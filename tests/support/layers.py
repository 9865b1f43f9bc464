"""The intended layers of the package, as data: which group of modules may import which.

A group is a set of module prefixes (the longest prefix that matches a module names its
group). ``MAY_IMPORT[g]`` lists the groups modules of ``g`` may import besides their own;
the relation is acyclic (checked), so no two groups import each other. ``NEVER`` spells out
rules that must hold whatever the table says (the ones a newcomer would break first).
``docs/concepts/architecture.md`` draws this table (a test keeps the drawing in step).
"""

from __future__ import annotations

GROUPS: dict[str, tuple[str, ...]] = {
    "face": ("aiostreams", "aiostreams.__main__", "aiostreams.app", "aiostreams.cli",
             "aiostreams.moved", "aiostreams.commands"),
    "operations": ("aiostreams.ops.app_collector", "aiostreams.ops.metrics",
                   "aiostreams.ops.progress", "aiostreams.ops.query_http",
                   "aiostreams.ops.task_totals"),
    "testing": ("aiostreams.testing", "aiostreams.pytest_plugin"),
    "clients": ("aiostreams.clients",),
    "settings": ("aiostreams.settings",),
    "views": ("aiostreams.ops", "aiostreams.ops.status", "aiostreams.ops.app_status",
              "aiostreams.ops.queries", "aiostreams.ops.inspection"),
    "lifecycle": ("aiostreams.lifecycle",),
    "dsl": ("aiostreams.dsl",),
    "processors": ("aiostreams.processors",),
    "engine": ("aiostreams.engine",),
    "sinks": ("aiostreams.sinks",),
    "topology": ("aiostreams.topology",),
    "state": ("aiostreams.state",),
    "replay": ("aiostreams.replay",),
    "services": ("aiostreams.services",),
    "transport": ("aiostreams.transport", "aiostreams.localjvm", "aiostreams.localkafka",
                  "aiostreams.localregistry", "aiostreams.localcatalog"),
    "schema_registry": ("aiostreams.schema_registry",),
    "runtime": ("aiostreams.runtime",),
    "vocabulary": ("aiostreams.types", "aiostreams.errors", "aiostreams.serde",
                   "aiostreams.pydantic_serde", "aiostreams.compact_json", "aiostreams.topic",
                   "aiostreams.windows", "aiostreams.policies", "aiostreams.lifecycle.state"),
}

BELOW_THE_ENGINE = {"state", "services", "topology", "transport", "schema_registry", "runtime",
                    "vocabulary"}

MAY_IMPORT: dict[str, set[str]] = {
    "face": {"operations", "clients", "settings", "views", "lifecycle", "dsl",
             "processors", "engine", "sinks", "replay"} | BELOW_THE_ENGINE,
    "operations": {"clients", "settings", "views", "lifecycle", "engine"} | BELOW_THE_ENGINE,
    "testing": {"face", "settings", "views", "lifecycle", "dsl", "processors", "engine",
                "sinks", "replay"} | BELOW_THE_ENGINE,
    "clients": {"lifecycle", "transport", "vocabulary", "runtime"},
    "settings": {"engine", "topology", "vocabulary", "runtime"},
    "views": {"lifecycle", "processors", "engine", "services"} | BELOW_THE_ENGINE,
    "lifecycle": {"vocabulary", "runtime"},
    "dsl": {"processors", "engine", "sinks"} | BELOW_THE_ENGINE,
    "processors": {"state", "services", "topology", "runtime", "vocabulary"},
    "engine": {"lifecycle"} | BELOW_THE_ENGINE,
    "sinks": {"topology", "transport", "runtime", "vocabulary"},
    "topology": {"state", "runtime", "vocabulary"},
    "state": {"runtime", "vocabulary"},
    "replay": {"services", "transport", "runtime", "vocabulary"},
    "services": {"runtime", "vocabulary"},
    "transport": {"runtime", "vocabulary"},
    "schema_registry": {"vocabulary"},
    "runtime": {"vocabulary"},
    "vocabulary": set(),
}

NEVER: list[tuple[str, str, str]] = [
    ("aiostreams.state", "aiostreams.engine", "stores do not know the engine that drives them"),
    ("aiostreams.topology", "aiostreams.transport", "a topology is a model, not a connection"),
    ("aiostreams.topology", "aiostreams.engine", "the engine runs a topology, not the reverse"),
    ("aiostreams.processors", "aiostreams.engine", "processors see the kernel (runtime), only"),
    ("aiostreams.engine", "aiostreams.app", "the engine knows nothing of the App"),
    ("aiostreams.engine", "aiostreams.dsl", "the engine runs topologies, whoever built them"),
    ("aiostreams.runtime", "aiostreams.", "the kernel imports only the vocabulary"),
    ("aiostreams.sinks", "aiostreams.engine", "a sink keeps the contract in runtime"),
    ("aiostreams.", "aiostreams.transport.memory_broker", "only the memory transport, tests "
     "and the test driver hold the memory broker"),
]
"""(importer prefix, imported prefix, why): no module under the first imports one under the
second. Exceptions to the last rule are listed in :data:`NEVER_EXCEPT`."""

NEVER_EXCEPT: dict[str, set[str]] = {
    "aiostreams.runtime": {"aiostreams.runtime", "aiostreams.types", "aiostreams.errors"},
    "aiostreams.": {"aiostreams.transport", "aiostreams.testing", "aiostreams.app"},
}
"""For a NEVER rule's importer prefix: importer (or imported) prefixes that are exempt."""


def group_of(module: str) -> str:
    best, found = "", ""
    for group, prefixes in GROUPS.items():
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, found = prefix, group
    if not found:
        raise KeyError(f"module {module} is in no layer group: add its package to GROUPS in "
                       "tests/support/layers.py (and to docs/concepts/architecture.md)")
    return found
