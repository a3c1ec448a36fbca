"""What a benchmark script reports: its lines for people, and with ``--json`` one JSON object for
perf/compare_revisions.py.

Under ``--json`` stdout holds only that object, ``{"<figure>": {"median": 123.0, "unit": "msgs/s"}}``,
and the lines for people go to stderr. Without it a script prints what it always printed.
"""

from __future__ import annotations

import contextlib
import json
import sys
import traceback
from collections.abc import Iterator

JSON_HELP = (
    "print one JSON object, figure name -> {median, unit}, on stdout (the usual lines go to stderr); "
    "a figure that fails is left out and the exit status is 1"
)


class Report:
    """The figures of one run of a benchmark script, by name."""

    def __init__(self, as_json: bool):
        self.as_json = as_json
        self.figures: dict[str, dict[str, float | str]] = {}
        self.failed: list[str] = []

    def line(self, text: str) -> None:
        print(text, file=sys.stderr if self.as_json else sys.stdout, flush=True)

    def figure(self, name: str, median: float, unit: str) -> None:
        self.figures[name] = {"median": median, "unit": unit}

    @contextlib.contextmanager
    def section(self, name: str) -> Iterator[None]:
        """Under ``--json``, a section that raises (a build from before what it measures existed) is
        told on stderr and its figures are missing, so the other figures of the run still count.
        Without ``--json`` the error propagates as it always did."""
        try:
            yield
        except Exception as exc:
            if not self.as_json:
                raise
            traceback.print_exc()
            self.failed.append(f"{name} ({type(exc).__name__}: {exc})")

    def finish(self) -> int:
        """The exit status; under ``--json`` the object is printed first, and the sections that failed
        are named on the last line of stderr (perf/compare_revisions.py quotes that line)."""
        if self.as_json:
            print(json.dumps(self.figures), flush=True)
        if self.failed:
            print(f"failed, figures missing: {'; '.join(self.failed)}", file=sys.stderr, flush=True)
        return 1 if self.failed else 0
