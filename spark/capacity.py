"""spark-submit spark/capacity.py LOGDIR... --out DIR [options]: rmq-capacity under spark-submit.

The pipeline is ``rmq.perf.capacity`` (installed with ``pip install 'rmq[spark]'``, so the
``rmq-capacity`` command and this launcher run the same code); from a checkout that is not installed,
the launcher finds it in ``src/`` beside this directory. Its Spark work is DataFrame expressions only
(no Python functions run on executors), so a cluster's executors need nothing of rmq installed, and
only per-point aggregates come back to the driver. ``rmq-capacity cluster up`` starts a standalone
cluster on this machine and prints the master URL to pass as ``--master``. ``--from-store`` is the
exception: its CommitLog reader (rmq.perf.capacity.commitlog_source) runs on the executors with rmq's
compiled record codec, so they need rmq installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    from rmq.perf.capacity.cli import main
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    from rmq.perf.capacity.cli import main

if __name__ == "__main__":
    main(prog_name="spark-submit spark/capacity.py")
