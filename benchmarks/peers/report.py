"""The peer benchmark's outputs: a text table, ``benchmarks/RESULTS.md``'s peer section
(only the part between :data:`BEGIN` and :data:`END` is rewritten; other sections stay) and
a PNG chart for the docs' benchmarks page (matplotlib, from the ``bench`` extra)."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path

from aiostreams.localkafka.releases import DEFAULT_KAFKA_VERSION
from benchmarks.peers.contenders import REPO
from benchmarks.peers.scenarios import Row, Sizes
from benchmarks.peers.startup import SCENARIO as STARTUP
from benchmarks.peers.startup import median_startup
from benchmarks.peers.targets import MB, Target, X

RESULTS = REPO / "benchmarks" / "RESULTS.md"
DOCS_PAGE = REPO / "docs" / "benchmarks.md"
CHART = REPO / "docs" / "img" / "peers.png"
BEGIN = ("<!-- peers:begin (rewritten by python -m benchmarks; only notes after peers:notes "
         "are kept) -->")
END = "<!-- peers:end -->"


def _order(row: Row) -> str:
    v = row.verdict
    if v is None:
        return "—"
    text = "in order" if v.in_key_order else f"{v.key_order_violations:,} violations"
    if v.split_keys:
        text += f", {v.split_keys} split keys"
    return text + ("" if row.contender.claims_key_order else " (not claimed)")


def _count(row: Row) -> str:
    v = row.verdict
    if row.result.error is not None:
        return f"**failed**: {row.result.error}"
    if row.standalone:
        return "— (measured alone)"
    if v is None:
        return f"{row.result.records:,} (end offsets)"
    text = f"{v.received:,} of {v.expected:,}"
    if v.missing:
        text += f", **{v.missing:,} missing**"
    if v.duplicates:
        text += f", {v.duplicates:,} duplicates"
    return text


def _commits(row: Row) -> str:
    if row.verdict is None or row.verdict.commits_ahead is None:
        return "—"
    return f"{row.verdict.commits_ahead:,}"


def _cpu(row: Row) -> str:
    return "—" if row.standalone else f"{row.result.cpu_share:.2f}"


def _rss(row: Row) -> str:
    rss = [b for _, b in row.result.rss]
    return f"{max(rss) / MB:,.0f}" if rss else "—"


def _met(target: Target) -> str:
    if not target.judged:
        return "figure (no target)"
    if target.met is None:
        return "not measured"
    return "met" if target.met else "**not met**"


def _measured(target: Target) -> str:
    if target.measured is None:
        return "—"
    if target.unit == "MB":
        return f"{target.measured:,.1f} MB"
    if target.unit == "s":
        return f"{target.measured:,.2f} s"
    return f"{target.measured:,.2f} {X}"


PEER_COLUMNS = ("raw aiokafka", "faust agent concurrency=1000", "faust agent", "quixstreams",
                "kafka streams")
"""The peers' columns of the current table; the raw loop's is its best variant."""


def command_of(scenario: str) -> str:
    """The command that runs ``scenario`` alone."""
    name = scenario.split()[0].lower()
    return "python -m benchmarks " + {"start-up": "startup", "scale-out": "scaleout"}.get(
        name, name)


def _rates(rows: Sequence[Row], scenario: str) -> dict[str, float]:
    """Best records/s per contender family in ``scenario`` (its rounds included)."""
    best: dict[str, float] = {}
    for row in rows:
        if row.result.error is not None or not (
                row.scenario == scenario or row.scenario.startswith(f"{scenario} #")):
            continue
        label = row.contender.label
        family = "raw aiokafka" if label.startswith("raw aiokafka") else label
        best[family] = max(best.get(family, 0.0), row.result.rate)
    return best


def current_table(rows: Sequence[Row], found: Sequence[Target]) -> str:
    """One line per target: the scenario, aiostreams' and each peer's rate in it, the
    limit, the measured ratio, the target, whether it is met, and the command."""
    lines = ["| scenario | aiostreams | " + " | ".join(PEER_COLUMNS)
             + " | limit | ratio | target | met | command |",
             "| --- | ---: | " + " | ".join("---:" for _ in PEER_COLUMNS)
             + " | ---: | ---: | --- | --- | --- |"]
    for t in found:
        if t.figures:
            given = dict(t.figures)
            ours_text = next((v for k, v in given.items() if k.startswith("aiostreams")),
                             "—")
            cells = [given.get(p, "—") for p in PEER_COLUMNS]
        else:
            rates = _rates(rows, t.scenario)
            ours = next((v for k, v in rates.items() if k.startswith("aiostreams")), None)
            ours_text = "—" if ours is None else f"{ours:,.0f}"
            cells = [f"{rates[p]:,.0f}" if p in rates else "—" for p in PEER_COLUMNS]
        lines.append(f"| {t.scenario} | {ours_text} | "
                     + " | ".join(cells)
                     + f" | {t.limit or '—'} | {_measured(t)} | {t.claim} | {_met(t)} "
                     f"| `{command_of(t.scenario)}` |")
    return "\n".join(lines)


def markdown_tables(rows: Sequence[Row], found: Sequence[Target]) -> str:
    lines = ["| scenario | contender | records/s | output (count) | per-key order "
             "| commits ahead of output | CPU (cores) | max RSS MB |",
             "| --- | --- | ---: | --- | --- | ---: | ---: | ---: |"]
    for row in rows:
        lines.append(f"| {row.scenario} | {row.contender.label} | {row.result.rate:,.0f} "
                     f"| {_count(row)} | {_order(row)} | {_commits(row)} "
                     f"| {_cpu(row)} | {_rss(row)} |")
    noted = [row for row in rows if row.notes]
    if noted:
        lines.append("")
    lines += [f"- {row.scenario}, {row.contender.label}: {'; '.join(row.notes)}."
              for row in noted]
    return "\n".join(lines)


def loads_text(loads: tuple[float, float]) -> str:
    """The 1-minute load average at the start and at the end of the run."""
    return f"load average at the start: {loads[0]:.1f}, at the end: {loads[1]:.1f}"


def table(rows: Sequence[Row], found: Sequence[Target],
          loads: tuple[float, float] | None = None) -> str:
    """The plain-text table printed at the end of a run (and the run's load averages)."""
    out = [] if loads is None else [f"{loads_text(loads)}; machine: {machine()}", ""]
    out += [f"{'scenario':12} {'contender':32} {'records/s':>11} {'count':>24} "
           f"{'key order':>28} {'commits ahead':>13} {'CPU':>5} {'RSS MB':>7}"]
    for row in rows:
        out.append(f"{row.scenario:12} {row.contender.label:32} {row.result.rate:11,.0f} "
                   f"{_count(row)[:24]:>24} {_order(row)[:28]:>28} {_commits(row):>13} "
                   f"{_cpu(row):>5} {_rss(row):>7}")
    out.append("")
    for t in found:
        out.append(f"{t.scenario:12} {t.claim:70} {_measured(t):>12} {_met(t)}")
    return "\n".join(out)


def machine() -> str:
    cores = len(os.sched_getaffinity(0))
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return (f"{cores} cores{mem}, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def broker_text() -> str:
    """Which broker the run used: ``AIOSTREAMS_KAFKA`` when set, else the release
    :func:`benchmarks._broker.kafka_broker` starts (``AIOSTREAMS_KAFKA_VERSION`` or the
    project's default)."""
    configured = os.environ.get("AIOSTREAMS_KAFKA")
    if configured:
        return f"The broker at {configured} (`AIOSTREAMS_KAFKA`)"
    version = os.environ.get("AIOSTREAMS_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION
    return f"Kafka {version} single node from `aiostreams.localkafka`"


def section(rows: Sequence[Row], found: Sequence[Target], command: str, sizes: Sizes,
            chart_link: str, notes: str = "",
            loads: tuple[float, float] | None = None) -> str:
    """The peer section; ``loads``: the load averages at the run's start and end (None:
    the end's only, taken now)."""
    load = (f"load average at the end: {os.getloadavg()[0]:.1f}" if loads is None
            else loads_text(loads))
    return "\n".join([
        BEGIN,
        "## Current results — `python -m benchmarks all`",
        "",
        f"Run `{command}` on {time.strftime('%Y-%m-%d')} ({load}); machine: {machine()} "
        "(absolute rates move with the machine's load; compare ratios within the run). "
        f"{broker_text()}. Every "
        "contender is its own process on the same preloaded input (fixed seed, "
        f"{sizes.keys:,} keys); rates are harness-measured from the first output to the "
        "last. Peers from the pinned venv (`benchmarks/peers/venv.py`).",
        "",
        current_table(rows, found),
        "",
        "Figures are records/s unless they say seconds or MB; a ratio is aiostreams' figure "
        "over the limit or the peer the target names, from the same run (exactly-once: over "
        "aiostreams at at-least-once). The runs behind each figure:",
        "",
        "### Runs behind the table",
        "",
        markdown_tables(rows, found),
        "",
        f"![aiostreams against its peers, records/s, log scale]({chart_link})",
        *(["", notes] if notes else []),
        END,
    ])


def write(rows: Sequence[Row], found: Sequence[Target], command: str, sizes: Sizes,
          loads: tuple[float, float] | None = None) -> None:
    """Rewrite the peer section of RESULTS.md and of the docs' benchmarks page (appended
    the first time), and the chart."""
    for page, link in ((RESULTS, "../docs/img/peers.png"), (DOCS_PAGE, "img/peers.png")):
        text = page.read_text()
        new = section(rows, found, command, sizes, link, notes=_kept_notes(text),
                      loads=loads)
        if BEGIN in text and END in text:
            head, rest = text.split(BEGIN, 1)
            _, tail = rest.split(END, 1)
            text = head + new + tail
        else:
            text = text.rstrip("\n") + "\n\n" + new + "\n"
        page.write_text(text)
    chart(rows, CHART)


NOTES_BEGIN = "<!-- peers:notes -->"


def _kept_notes(text: str) -> str:
    """Hand-written notes inside the section, after :data:`NOTES_BEGIN`, survive a rewrite."""
    if NOTES_BEGIN not in text or END not in text:
        return ""
    return NOTES_BEGIN + text.split(NOTES_BEGIN, 1)[1].split(END, 1)[0].rstrip("\n")


def chart(rows: Sequence[Row], path: Path) -> None:
    """Records/s per contender, one panel per throughput scenario (one log scale for all),
    exactly-once against at-least-once, P5's RSS over time (with and without a stuck
    record), start-up and the scale-out pauses (seconds, with their targets)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = [s for s in ("P1 sleep", "P1 jitter", "P1 tail", "P1 http", "P2", "P6")
             if any(r.scenario == s for r in rows)]
    eos = [s for s in ("EOS P1 sleep", "EOS P2") if _rates(rows, s)]
    memory = [r for r in rows if r.scenario.startswith("P5") and r.result.rss]
    seconds = _seconds_bars(rows)
    panels = len(rates) + (1 if eos else 0) + (1 if memory else 0) + len(seconds)
    if not panels:
        return
    columns = min(3, panels)
    lines = -(-panels // columns)
    fig, axes = plt.subplots(lines, columns, figsize=(4.6 * columns, 4.4 * lines),
                             squeeze=False)
    flat = iter(axes.flat)
    top = max((r.result.rate for r in rows if r.scenario in rates), default=1.0)
    for scenario in rates:
        ax = next(flat)
        chosen = [r for r in rows if r.scenario == scenario and r.result.error is None]
        labels = [r.contender.label.replace(" concurrency=", "\nc=").replace(" (", "\n(")
                  for r in chosen]
        colours = ["#1f77b4" if r.contender.module == "aiostreams" else "#999999"
                   for r in chosen]
        bars = ax.bar(range(len(chosen)), [r.result.rate for r in chosen], color=colours)
        ax.bar_label(bars, labels=[f"{r.result.rate:,.0f}" for r in chosen], fontsize=7)
        ax.set_xticks(range(len(chosen)), labels, rotation=40, ha="right", fontsize=7)
        ax.set_yscale("log")
        ax.set_ylim(50, top * 3)
        ax.set_title(scenario)
        ax.set_ylabel("records/s (log scale)")
    if eos:
        ax = next(flat)
        pairs = [(f"{s.removeprefix('EOS ')}\n{g}", _rates(rows, s).get(label, 0.0))
                 for s in eos for g, label in (("at_least_once", "aiostreams"),
                                               ("exactly_once", "aiostreams exactly_once"))]
        bars = ax.bar(range(len(pairs)), [v for _, v in pairs],
                      color=["#aec7e8", "#1f77b4"] * len(eos))
        ax.bar_label(bars, labels=[f"{v:,.0f}" for _, v in pairs], fontsize=7)
        ax.set_xticks(range(len(pairs)), [k for k, _ in pairs], fontsize=7)
        ax.set_title("exactly-once against at-least-once (best run)")
        ax.set_ylabel("records/s (committed)")
    if memory:
        ax = next(flat)
        for row in memory:
            ax.plot([t for t, _ in row.result.rss], [b / MB for _, b in row.result.rss],
                    label=row.scenario)
        ax.set_title("P5: aiostreams RSS")
        ax.set_xlabel("seconds since start")
        ax.set_ylabel("RSS (MB)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    for title, (bars_of, target) in seconds.items():
        ax = next(flat)
        bars = ax.bar(range(len(bars_of)), [v for _, v in bars_of],
                      color=["#1f77b4" if k.startswith("aiostreams") else "#999999"
                             for k, _ in bars_of])
        ax.bar_label(bars, labels=[f"{v:.2f} s" for _, v in bars_of], fontsize=7)
        ax.set_xticks(range(len(bars_of)), [k for k, _ in bars_of], rotation=20,
                      ha="right", fontsize=7)
        ax.axhline(target, color="#d62728", linestyle="--", linewidth=1,
                   label=f"target ≤ {target:g} s")
        ax.set_title(title)
        ax.set_ylabel("seconds")
        ax.legend(fontsize=7)
    for ax in flat:
        ax.set_visible(False)
    fig.suptitle("aiostreams and its peers: one run, one broker, the same input")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _seconds_bars(rows: Sequence[Row]) -> dict[str, tuple[list[tuple[str, float]], float]]:
    """The panels in seconds: title -> ((label, seconds) bars, target)."""
    panels: dict[str, tuple[list[tuple[str, float]], float]] = {}
    labels = dict.fromkeys(r.contender.label for r in rows
                           if r.scenario.startswith(f"{STARTUP} #"))
    starts = [(label, m) for label in labels
              if (m := median_startup(rows, label)) is not None]
    if starts:
        panels["start-up: process start to first output (median)"] = (starts, 1.0)
    scale = next((r for r in rows if r.scenario == "Scale-out"), None)
    if scale is not None and "join pause s" in scale.figures:
        panels["scale-out: longest pause of a partition"] = ([
            ("alone (baseline)", scale.figures["baseline gap s"]),
            ("second worker joins", scale.figures["join pause s"]),
            ("second worker leaves", scale.figures["leave pause s"])], 2.0)
    return panels
