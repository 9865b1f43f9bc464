"""A real S3-protocol server for the object-store tests: moto's server (``moto[server]``, the
test extra) in a process of its own on 127.0.0.1, and the options each client needs to reach
it - delta-rs' storage options and Spark's ``fs.s3a.*`` settings."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections import deque
from dataclasses import dataclass

ACCESS_KEY, SECRET_KEY, REGION = "aiostreams-test", "aiostreams-secret", "us-east-1"
HADOOP_AWS = "org.apache.hadoop:hadoop-aws:3.4.1"  # pyspark 4.0.0 ships hadoop-client 3.4.1


@dataclass
class S3Server:
    process: subprocess.Popen[str]
    endpoint: str
    reader: threading.Thread

    @classmethod
    def start(cls, timeout: float = 60.0) -> S3Server:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert process.stderr is not None
        seen = []
        for line in process.stderr:  # blocks until the server says it listens (or dies)
            seen.append(line)
            if re.search(rf"Running on http://127\.0\.0\.1:{port}", line):
                # it logs every request to stderr: keep reading, or a full pipe stops it
                tail: deque[str] = deque(seen, maxlen=200)
                reader = threading.Thread(target=tail.extend, args=(process.stderr,),
                                          daemon=True, name="moto-stderr")
                reader.start()
                return cls(process, f"http://127.0.0.1:{port}", reader)
        process.wait(timeout)
        raise RuntimeError("moto's S3 server did not start:\n" + "".join(seen))

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.join(30)  # it ends at the pipe's end
        if self.process.stderr is not None:
            self.process.stderr.close()

    def create_bucket(self) -> str:
        import boto3

        name = f"aiostreams-{uuid.uuid4().hex[:12]}"
        client = boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                              aws_secret_access_key=SECRET_KEY, region_name=REGION)
        client.create_bucket(Bucket=name)
        client.close()
        return name

    @property
    def storage_options(self) -> dict[str, str]:
        """delta-rs' options for this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ALLOW_HTTP": "true",
                "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_REGION": REGION}

    @property
    def spark_conf(self) -> dict[str, str]:
        """Spark's S3A settings for this server (with :data:`HADOOP_AWS` on the classpath)."""
        return {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.endpoint.region": REGION,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.access.key": ACCESS_KEY,
            "spark.hadoop.fs.s3a.secret.key": SECRET_KEY,
            "spark.hadoop.fs.s3a.aws.credentials.provider":
                "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        }
