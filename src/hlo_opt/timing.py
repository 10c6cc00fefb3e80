"""`--time-passes`: per-pass wall time and change flags as a rich table on stderr.

Runs of the same pass in the same pipeline (a fixed point runs them many times) are one row,
in the order they first ran:

    pass                    pipeline         runs   time (ms)   changed
    algsimp                 simplification      3       12.4    yes (2/3)
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from hlo_common.hlo_pass.pipeline import PassRunRecord


@dataclass
class PassTimingRow:
    pass_name: str
    pipeline: str
    runs: int = 0
    seconds: float = 0.0
    changed_runs: int = 0

    @property
    def changed_text(self) -> str:
        if self.changed_runs == 0:
            return "no"
        if self.runs == 1:
            return "yes"
        return f"yes ({self.changed_runs}/{self.runs})"


def summarize(records: list[PassRunRecord]) -> list[PassTimingRow]:
    rows: dict[tuple[str, str], PassTimingRow] = {}
    for r in records:
        row = rows.setdefault((r.pipeline, r.pass_name), PassTimingRow(r.pass_name, r.pipeline))
        row.runs += 1
        row.seconds += r.seconds
        row.changed_runs += int(r.changed)
    return list(rows.values())


def timing_table(records: list[PassRunRecord], title: str = "hlo-opt pass timings") -> Table:
    table = Table(title=title)
    table.add_column("pass")
    table.add_column("pipeline")
    table.add_column("runs", justify="right")
    table.add_column("time (ms)", justify="right")
    table.add_column("changed")
    rows = summarize(records)
    for row in rows:
        table.add_row(row.pass_name, row.pipeline, str(row.runs), f"{row.seconds * 1e3:.2f}",
                      row.changed_text)
    total = sum(row.seconds for row in rows)
    table.add_section()
    table.add_row("total", "", str(sum(row.runs for row in rows)), f"{total * 1e3:.2f}",
                  str(sum(1 for row in rows if row.changed_runs)))
    return table


def print_timing_table(records: list[PassRunRecord], title: str = "hlo-opt pass timings") -> None:
    Console(stderr=True, width=120).print(timing_table(records, title))
