"""``ROCKETMQ_SPARK_LOG_FILE``: the SDK's log records of Spark's Python processes in one file.

The Python processes Spark starts (the workers that run tasks, the process that runs a
streaming source on the driver) have no logging handler of their own: their ``rocketmq_sdk``
records (producers and consumers started, offsets committed, warnings) are lost or reach the
JVM's stderr without a time or process. With ``ROCKETMQ_SPARK_LOG_FILE=/path/to/file`` in the
environment of the JVM that starts them (set it before the ``SparkSession``, or through
``spark.executorEnv.*`` on a cluster), each such process appends the records of the
``rocketmq_sdk`` logger to that file, one line each with its pid;
``ROCKETMQ_SPARK_LOG_LEVEL`` picks the level (default ``INFO``). Unset, nothing is written.
"""

from __future__ import annotations

import logging
import os

LOG_FILE_ENV = "ROCKETMQ_SPARK_LOG_FILE"
LOG_LEVEL_ENV = "ROCKETMQ_SPARK_LOG_LEVEL"
FORMAT = "%(asctime)s pid=%(process)d %(threadName)s %(name)s %(levelname)s %(message)s"


class _EnvFileHandler(logging.FileHandler):
    """The handler this module adds (so it is added once per process)."""


def log_to_file_from_env() -> None:
    """Add the file handler named by ``ROCKETMQ_SPARK_LOG_FILE`` to the ``rocketmq_sdk`` logger
    (once per process; inherited across ``fork``). An unusable file or level is reported on the
    ``rocketmq_sdk.integrations.spark`` logger and otherwise ignored."""
    path = os.environ.get(LOG_FILE_ENV, "")
    if not path:
        return
    sdk_logger = logging.getLogger("rocketmq_sdk")
    if any(isinstance(h, _EnvFileHandler) for h in sdk_logger.handlers):
        return
    name = os.environ.get(LOG_LEVEL_ENV, "INFO").strip().upper()
    level = logging.getLevelName(name)
    own = logging.getLogger("rocketmq_sdk.integrations.spark")
    if not isinstance(level, int):
        own.warning("%s=%r is not a logging level; INFO is used", LOG_LEVEL_ENV, name)
        level = logging.INFO
    try:
        handler = _EnvFileHandler(path, encoding="utf-8")
    except OSError as exc:
        own.warning("%s=%s cannot be opened (%s); not logging to it", LOG_FILE_ENV, path, exc)
        return
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.setLevel(level)
    sdk_logger.addHandler(handler)
    if sdk_logger.getEffectiveLevel() > level:
        sdk_logger.setLevel(level)
