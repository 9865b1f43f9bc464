"""The oracle suite's fixtures: one Kafka Streams JVM for the whole session, and the counts
of cases compared per operator family printed at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from oracle_check import COUNTS
from oracle_jvm import OracleJVM, ensure_classpath


@pytest.fixture(scope="session")
def oracle() -> Iterator[OracleJVM]:
    """The Kafka Streams oracle, at the release ``java/pom.xml`` pins (4.4.0, the suite's
    broker's): jars fetched and ``Oracle.java`` compiled on first use, cached under
    ``.cache/``."""
    jvm = OracleJVM(ensure_classpath())
    try:
        yield jvm
    finally:
        jvm.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not COUNTS:
        return
    terminalreporter.section("Kafka Streams oracle: cases compared per operator family")
    for family, count in sorted(COUNTS.items()):
        terminalreporter.write_line(f"{family:<28} {count:>6}")
    terminalreporter.write_line(f"{'total':<28} {sum(COUNTS.values()):>6}")
