"""One settings source for an S3 table: delta-rs' ``storage_options`` give the driver's
view of the bucket (a pyarrow :class:`~pyarrow.fs.S3FileSystem`, to list a batch's files
and read their footers) and Spark's ``fs.s3a.*`` settings (the executors' view), so a user
states the endpoint, region and keys once.

Mapping (delta-rs option → S3A setting, pyarrow argument):

=================================  ===================================  ====================
``AWS_ENDPOINT_URL``               ``fs.s3a.endpoint``                  ``endpoint_override``
``AWS_REGION``                     ``fs.s3a.endpoint.region``           ``region``
``AWS_ALLOW_HTTP=true``            ``fs.s3a.connection.ssl.enabled``    ``scheme="http"``
                                   ``=false``
``AWS_ACCESS_KEY_ID``,             ``fs.s3a.access.key``/``secret.key`` ``access_key``/
``AWS_SECRET_ACCESS_KEY``          (+ the simple credentials provider)  ``secret_key``
``AWS_SESSION_TOKEN``              ``fs.s3a.session.token`` (+ the      ``session_token``
                                   temporary credentials provider)
``AWS_VIRTUAL_HOSTED_STYLE_``      ``fs.s3a.path.style.access`` is its  ``force_virtual_
``REQUEST`` (default false)        negation                             addressing``
=================================  ===================================  ====================

Options left out come from the environment (or the instance profile) for every client
alike. Settings a user gives in ``SparkConfig.conf`` win over derived ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from aiostreams.errors import ConfigError
from aiostreams.sinks.spark.session import SparkConfig

__all__ = ["s3_filesystem", "s3_key", "s3a_spark_conf", "with_s3a_conf"]

_TRUE = ("true", "1", "yes")
_S3A = "spark.hadoop.fs.s3a."


def _option(options: Mapping[str, str], name: str) -> str | None:
    """delta-rs accepts its options in any case (``aws_region`` = ``AWS_REGION``)."""
    for key, value in options.items():
        if key.upper() == name:
            return value
    return None


def _flag(options: Mapping[str, str], name: str) -> bool:
    value = _option(options, name)
    return value is not None and value.strip().lower() in _TRUE


def s3a_spark_conf(options: Mapping[str, str]) -> dict[str, str]:
    """Spark's ``spark.hadoop.fs.s3a.*`` settings for the store ``options`` reach."""
    conf: dict[str, str] = {}
    endpoint = _option(options, "AWS_ENDPOINT_URL")
    if endpoint is not None:
        conf[_S3A + "endpoint"] = endpoint
    region = _option(options, "AWS_REGION")
    if region is not None:
        conf[_S3A + "endpoint.region"] = region
    if _flag(options, "AWS_ALLOW_HTTP") and (endpoint or "").startswith("http://"):
        conf[_S3A + "connection.ssl.enabled"] = "false"
    conf[_S3A + "path.style.access"] = str(
        not _flag(options, "AWS_VIRTUAL_HOSTED_STYLE_REQUEST")).lower()
    key, secret = (_option(options, "AWS_ACCESS_KEY_ID"),
                   _option(options, "AWS_SECRET_ACCESS_KEY"))
    if key is not None and secret is not None:
        conf[_S3A + "access.key"] = key
        conf[_S3A + "secret.key"] = secret
        token = _option(options, "AWS_SESSION_TOKEN")
        if token is not None:
            conf[_S3A + "session.token"] = token
            conf[_S3A + "aws.credentials.provider"] = (
                "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider")
        else:
            conf[_S3A + "aws.credentials.provider"] = (
                "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider")
    return conf


def with_s3a_conf(spark: SparkConfig | None, options: Mapping[str, str]) -> SparkConfig:
    """``spark`` (default: :class:`SparkConfig`'s defaults) with the S3A settings derived
    from ``options`` added where its ``conf`` does not set them."""
    config = spark if spark is not None else SparkConfig()
    return config.model_copy(update={"conf": {**s3a_spark_conf(options), **config.conf}})


def s3_filesystem(options: Mapping[str, str]) -> pafs.S3FileSystem:
    """pyarrow's S3 filesystem for the store ``options`` reach (paths ``bucket/key``)."""
    endpoint = _option(options, "AWS_ENDPOINT_URL")
    scheme = "https"
    if endpoint is not None:
        parts = urlsplit(endpoint)
        if parts.scheme == "http" and not _flag(options, "AWS_ALLOW_HTTP"):
            raise ConfigError(f"storage option AWS_ENDPOINT_URL={endpoint!r} is plain http; "
                              "set AWS_ALLOW_HTTP='true' to use it")
        scheme = parts.scheme or "https"
        endpoint = parts.netloc or endpoint
    return pafs.S3FileSystem(
        access_key=_option(options, "AWS_ACCESS_KEY_ID"),
        secret_key=_option(options, "AWS_SECRET_ACCESS_KEY"),
        session_token=_option(options, "AWS_SESSION_TOKEN"),
        region=_option(options, "AWS_REGION"),
        endpoint_override=endpoint, scheme=scheme,
        force_virtual_addressing=_flag(options, "AWS_VIRTUAL_HOSTED_STYLE_REQUEST"))


def s3_key(uri: str) -> str:
    """``bucket/key`` (pyarrow's S3 path) of an ``s3a://bucket/key`` URI."""
    parts = urlsplit(uri)
    assert parts.scheme in ("s3a", "s3") and parts.netloc, uri
    return f"{parts.netloc}/{parts.path.strip('/')}"
