"""The data source Spark instantiates for format("nsq")."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StructType

from .options import SinkOptions, SourceOptions
from .reader import NsqStreamReader
from .schema import SOURCE_DDL
from .writer import NsqStreamWriter, NsqWriter


class NsqDataSource(DataSource):
    """spark.readStream.format("nsq") / df.write[Stream].format("nsq").

    Keep `self.options` as Spark's case-insensitive mapping (a dict() copy would lower-case
    every key and lose the camel-case lookups)."""

    @classmethod
    def name(cls) -> str:
        return "nsq"

    def schema(self) -> str:
        return SOURCE_DDL

    def streamReader(self, schema: StructType) -> NsqStreamReader:
        return NsqStreamReader(SourceOptions.parse(self.options), schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        raise NotImplementedError(
            "nsq is a streaming source (messages are FINed after Spark commits a "
            "micro-batch): use spark.readStream.format('nsq'), with trigger(availableNow=True) "
            "for a one-off drain"
        )

    def writer(self, schema: StructType, overwrite: bool) -> NsqWriter:
        return NsqWriter(SinkOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> NsqStreamWriter:
        return NsqStreamWriter(SinkOptions.parse(self.options), schema)
