"""One local[1] Spark session for every capacity test that needs Spark: a JVM takes seconds to start."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from rmq.perf.capacity import read


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = read.session("local[1]", app_name="rmq-capacity-tests")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
