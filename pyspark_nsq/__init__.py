"""NSQ for PySpark 4 Structured Streaming: spark.readStream.format("nsq") and
df.write[Stream].format("nsq").

Spark finds `DefaultSource` here by itself (it scans sys.path for `pyspark_*` modules);
`register(spark)` does it explicitly where that scan cannot see this package. The pyspark-free
parts (`pyspark_nsq.conn`, `.http`, `.commands`) import without pyspark."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .source import NsqDataSource


def __getattr__(name: str) -> Any:
    if name in ("DefaultSource", "NsqDataSource"):
        from .source import NsqDataSource

        return NsqDataSource
    raise AttributeError(f"module 'pyspark_nsq' has no attribute {name!r}")


def register(spark: SparkSession | None = None) -> type[NsqDataSource]:
    """Register format("nsq") with `spark` (default: the active session)."""
    from pyspark.sql import SparkSession

    from .source import NsqDataSource

    session = spark or SparkSession.getActiveSession()
    if session is None:
        raise RuntimeError("pyspark_nsq.register: no active SparkSession")
    session.dataSource.register(NsqDataSource)
    return NsqDataSource


__all__ = ["DefaultSource", "NsqDataSource", "register"]
