"""The Spark session every pipeline job uses: ``local[*]`` unless given a master URL."""

import os
import sys

DEFAULT_MASTER = "local[*]"
GIB = 1 << 30
DRIVER_MEMORY_HELP = "spark.driver.memory, e.g. 4g (default in local mode: a quarter of RAM, 1g to 8g)"


def local_driver_memory() -> str:
    """A quarter of the machine's memory, between 1g and 8g: in local mode the driver is the only executor, and
    Spark's 1g default runs out of heap caching the events of a long comparison (10M trace lines)."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return "1g"
    return f"{min(8, max(1, physical // 4 // GIB))}g"


class SparkUnavailableError(RuntimeError):
    """PySpark is not installed (``pip install 'zkcoord[spark]'``) or no Java runtime is found."""


def spark_session(
    app_name: str, master: str | None = None, shuffle_partitions: int | None = None, driver_memory: str | None = None
):
    """A SparkSession for ``app_name`` on ``master`` (default ``local[*]``), UTC, without the web UI.

    ``driver_memory`` is ``spark.driver.memory`` (``4g``); in local mode it defaults to :func:`local_driver_memory`
    unless ``SPARK_DRIVER_MEMORY`` or ``PYSPARK_SUBMIT_ARGS`` says otherwise. It takes effect only when this call
    starts the JVM.

    In local mode the driver binds 127.0.0.1 unless ``SPARK_LOCAL_IP`` says otherwise, so that a laptop with no
    resolvable host name or a closed network works, and the Python workers run this interpreter unless
    ``PYSPARK_PYTHON`` says otherwise (Spark's ``python3`` may be one without zkcoord, whose codec they need).
    ``shuffle_partitions`` defaults to twice the local cores (Spark's 200 make small inputs slow); on a cluster
    Spark's own default stays.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as error:
        raise SparkUnavailableError("the pipeline needs PySpark: pip install 'zkcoord[spark]'") from error
    master = master or DEFAULT_MASTER
    local = master.startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if local and driver_memory is None and not _driver_memory_configured():
        driver_memory = local_driver_memory()
    if driver_memory:
        builder = builder.config("spark.driver.memory", driver_memory)
    if local:
        builder = builder.config("spark.driver.host", os.environ["SPARK_LOCAL_IP"]).config(
            "spark.sql.shuffle.partitions", str(shuffle_partitions or 2 * (os.cpu_count() or 1))
        )
    elif shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    try:
        session = builder.getOrCreate()
    except Exception as error:  # py4j raises plain Exceptions when the JVM cannot start
        raise SparkUnavailableError(f"Spark did not start on {master}: {error}") from error
    session.sparkContext.setLogLevel("ERROR")
    return session


def _driver_memory_configured() -> bool:
    submit_args = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    return "SPARK_DRIVER_MEMORY" in os.environ or "driver-memory" in submit_args or "driver.memory" in submit_args
