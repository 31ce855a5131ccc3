"""Spark settings for the tests' small jobs: in the session the tests share and in the commands they start."""

import os

# Interpreted expressions: compiling generated code costs more than it saves on inputs of a few hundred events.
SMALL_JOBS = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
SUBMIT_ARGS = " ".join(f"--conf {key}={value}" for key, value in SMALL_JOBS.items()) + " pyspark-shell"


def small_jobs_env() -> dict[str, str]:
    """The environment for a child that starts its own Spark: the small jobs' settings, on the loopback."""
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_SUBMIT_ARGS": SUBMIT_ARGS}
