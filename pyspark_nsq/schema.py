"""The source's row schema and the checks on user schemas (source override and sink input)."""

from __future__ import annotations

from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

SOURCE_DDL = (
    "id string, body binary, timestamp timestamp, attempts int, topic string, channel string, "
    "nsqd string"
)
SOURCE_TYPES: dict[str, DataType] = {
    "id": StringType(),
    "body": BinaryType(),
    "timestamp": TimestampType(),
    "attempts": IntegerType(),
    "topic": StringType(),
    "channel": StringType(),
    "nsqd": StringType(),  # the nsqd's TCP address: (nsqd, id) names one message
}

SOURCE_SCHEMA = StructType([StructField(name, t) for name, t in SOURCE_TYPES.items()])


def source_schema(*names: str) -> StructType:
    """The source's schema, or the named columns of it in that order."""
    return StructType([StructField(n, SOURCE_TYPES[n]) for n in names or SOURCE_TYPES])


class SchemaError(ValueError):
    """A schema the nsq source or sink cannot work with."""


def check_source_schema(schema: StructType) -> None:
    """A schema given with readStream.schema(...) may pick and order the source's columns,
    not rename or retype them."""
    for field in schema.fields:
        expected = SOURCE_TYPES.get(field.name)
        if expected is None:
            raise SchemaError(
                f"nsq source: unknown column {field.name!r}; the columns are {SOURCE_DDL}"
            )
        if field.dataType != expected:
            raise SchemaError(
                f"nsq source: column {field.name!r} must be {expected.simpleString()}, "
                f"not {field.dataType.simpleString()}"
            )


def check_sink_schema(schema: StructType, *, topic_option: str | None) -> None:
    """The sink needs a `body` column (binary or string) and, unless option `topic` is set,
    a string `topic` column; other columns are ignored."""
    names = {f.name: f.dataType for f in schema.fields}
    body = names.get("body")
    if body is None:
        raise SchemaError(
            "nsq sink: the DataFrame needs a 'body' column (binary or string); it has "
            + ", ".join(f"{n} {t.simpleString()}" for n, t in names.items())
        )
    if not isinstance(body, BinaryType | StringType):
        raise SchemaError(
            f"nsq sink: column 'body' must be binary or string, not {body.simpleString()} "
            "(cast it, e.g. to_json(struct(*)) or col.cast('string'))"
        )
    topic = names.get("topic")
    if topic is not None and not isinstance(topic, StringType):
        raise SchemaError(f"nsq sink: column 'topic' must be string, not {topic.simpleString()}")
    if topic is None and topic_option is None:
        raise SchemaError("nsq sink: set option 'topic' or add a string 'topic' column")
