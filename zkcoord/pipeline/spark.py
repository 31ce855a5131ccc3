"""The Spark session every pipeline job uses: ``local[*]`` unless given a master URL."""

import os
import sys

DEFAULT_MASTER = "local[*]"


class SparkUnavailableError(RuntimeError):
    """PySpark is not installed (``pip install 'zkcoord[spark]'``) or no Java runtime is found."""


def spark_session(app_name: str, master: str | None = None, shuffle_partitions: int | None = None):
    """A SparkSession for ``app_name`` on ``master`` (default ``local[*]``), UTC, without the web UI.

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
