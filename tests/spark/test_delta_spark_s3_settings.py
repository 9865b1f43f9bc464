"""One settings source for an S3 table: the S3A settings Spark gets are derived from the
sink's delta-rs ``storage_options`` (pure functions, no server)."""

from __future__ import annotations

import pytest
from s3kit import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from sparkkit import Order

from aiostreams.sinks import DeltaSink, SparkConfig
from aiostreams.sinks.object_store import s3_filesystem, s3a_spark_conf, with_s3a_conf

OPTIONS = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ALLOW_HTTP": "true",
           "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
           "AWS_REGION": REGION}


def test_s3a_settings_derived_from_storage_options_are_those_a_user_writes_by_hand() -> None:
    """The hand-written ``fs.s3a.*`` settings the pyarrow engine's S3 tests give Spark."""
    by_hand = S3Server(None, "http://127.0.0.1:9000", None).spark_conf  # type: ignore[arg-type]
    assert s3a_spark_conf(OPTIONS) == by_hand


def test_option_names_are_read_in_any_case_and_virtual_hosting_turns_path_style_off() -> None:
    conf = s3a_spark_conf({"aws_region": "eu-west-1",
                           "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true"})
    assert conf == {"spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
                    "spark.hadoop.fs.s3a.path.style.access": "false"}


def test_session_tokens_select_the_temporary_credentials_provider() -> None:
    conf = s3a_spark_conf({**OPTIONS, "AWS_SESSION_TOKEN": "t"})
    assert conf["spark.hadoop.fs.s3a.session.token"] == "t"
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith(
        "TemporaryAWSCredentialsProvider")


def test_settings_the_user_gives_spark_win_over_derived_ones() -> None:
    mine = SparkConfig(conf={"spark.hadoop.fs.s3a.endpoint": "http://proxy:1"})
    merged = with_s3a_conf(mine, OPTIONS)
    assert merged.conf["spark.hadoop.fs.s3a.endpoint"] == "http://proxy:1"
    assert merged.conf["spark.hadoop.fs.s3a.endpoint.region"] == REGION


def test_a_spark_sink_on_s3a_gets_the_derived_settings() -> None:
    sink = DeltaSink("s3a://lake/tables/orders", Order, engine="spark",
                     storage_options=OPTIONS)
    assert sink.spark_engine is not None and sink.spark_engine.spark is not None
    assert sink.spark_engine.spark.conf == s3a_spark_conf(OPTIONS)
    assert sink.spark_engine.storage_options == OPTIONS


def test_a_plain_http_endpoint_without_allow_http_is_refused_for_the_driver() -> None:
    with pytest.raises(ValueError, match="AWS_ALLOW_HTTP"):
        s3_filesystem({k: v for k, v in OPTIONS.items() if k != "AWS_ALLOW_HTTP"})
