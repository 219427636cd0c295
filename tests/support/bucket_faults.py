"""The bucket half of the fault campaign (issue 42): fake-gcs-server and SeaweedFS behind the
fault proxy (support/faultproxy.py), the real entries of a real JAX job (support/faults.World).

- `publish_reads`: a sealed publisher and then sealed readers talk to the bucket through a proxy
  that fails a seeded share of requests (5xx, resets before and after the server applied them,
  bodies cut short, lengths that lie, flipped bytes). Every load is the entry's exact bytes or a
  miss; once the faults stop, every whole, signed entry loads, `verify` judges the prefix, and a
  clean publisher completes the prefix.
- `killed_publisher`: a publisher process killed by the proxy at its k-th request, before the
  server sees it or after the server applied it; then the same checks.
- `killed_command`: `seal` of a prefix a job filled unsigned, `seal --add-signature` (a second
  key) or `gc --max-size 0` of a sealed prefix, killed the same way; then the same checks, and
  the next run completes.
All count into a faults.Tally, as the directory kinds do.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from support import faultproxy, faults, gcs_emulator, paths, seaweedfs
from support.faultproxy import Fault
from support.jobs import clean_env, jaxcache

BUCKET = "jaxfaults"
NOISE = (Fault.STATUS_500, Fault.STATUS_503, Fault.RESET, Fault.RESET_AFTER, Fault.TRUNCATE,
         Fault.LONG_LENGTH, Fault.SHORT_LENGTH, Fault.CORRUPT)

PUBLISHER = r"""
import json, sys
from jaxcache.trust.inputs import signing_keys as keys
from jaxcache.seal.objects import store_for_url as objects
from jaxcache.seal.stores.bucket_backend import BucketSealedCache
from jaxcache.trust.rules import target
url, keyfile, listing = sys.argv[1:4]
signer = keys.load_signing(keyfile)
cache = BucketSealedCache(objects.open_store(target.parse_bucket(url)),
                          trusted=[signer.public], signer=signer)
for key, hexdata in json.load(open(listing)):
    try:
        cache.put(key, bytes.fromhex(hexdata))
    except OSError as exc:  # as JAX takes a failed put: a warning, and on
        print(f"not published: {exc}", file=sys.stderr)
        continue
    print("published", key, flush=True)
"""


@dataclass
class Backend:
    """One object store, its server's address, and the environment that reaches it."""

    name: str  # gcs, s3
    scheme: str
    upstream: tuple[str, int]
    server: object
    bucket: str = BUCKET
    owned: bool = True  # started for this backend alone: stop() stops it

    def env(self, proxy: faultproxy.Proxy, deadline_s: float = 5.0) -> dict[str, str]:
        extra = {"JAXCACHE_BUCKET_DEADLINE_S": str(deadline_s)}
        if self.name == "gcs":
            extra["STORAGE_EMULATOR_HOST"] = proxy.url
        else:
            extra.update({**self.server.env(), "AWS_ENDPOINT_URL": proxy.url})  # type: ignore[attr-defined]
        return clean_env(**extra)

    def url(self, prefix: str) -> str:
        return f"{self.scheme}://{self.bucket}/{prefix}"

    def names(self, prefix: str) -> dict[str, str]:
        return self.server.names(self.bucket, prefix)  # type: ignore[attr-defined]

    def upload(self, name: str, data: bytes) -> None:
        """Straight to the server, as someone with write on the bucket."""
        self.server.upload(self.bucket, name, data)  # type: ignore[attr-defined]

    def download(self, name: str) -> bytes | None:
        return self.server.download(self.bucket, name)  # type: ignore[attr-defined]

    def stop(self) -> None:
        """The server, where it is this backend's own; a shared one outlives it (its
        bucket is this backend's alone)."""
        if self.owned:
            self.server.stop()  # type: ignore[attr-defined]


def available() -> list[str]:
    out = []
    if gcs_emulator.binary() is not None:
        out.append("gcs")
    if seaweedfs.binary() is not None and seaweedfs.has_boto3():
        out.append("s3")
    return out


def start(name: str, root: Path, s3: seaweedfs.Server | None = None) -> Backend:
    """A server of its own; or, for s3 where `s3` is given, a fresh bucket on that running
    server (SeaweedFS takes seconds to start, so the suite starts one per worker)."""
    if name == "gcs":
        emu = gcs_emulator.start(root / "gcs-data", (BUCKET,))
        return Backend("gcs", "gs", ("127.0.0.1", emu.port), emu)
    if s3 is not None:
        bucket = f"{BUCKET}-{secrets.token_hex(4)}"
        s3.make_bucket(bucket)
        return Backend("s3", "s3", ("127.0.0.1", s3.port), s3, bucket, owned=False)
    srv = seaweedfs.start(root / "seaweedfs", (BUCKET,))
    return Backend("s3", "s3", ("127.0.0.1", srv.port), srv)


def is_download(r: faultproxy.Request, name: str) -> bool:
    """`r` downloads the bytes of the object whose name ends in `name` (not its metadata)."""
    from urllib.parse import unquote

    return r.method == "GET" and unquote(r.target.split("?")[0]).endswith(name) and \
        ("alt=media" in r.target or "storage/v1" not in r.target)


def is_listing(b: Backend, r: faultproxy.Request) -> bool:
    """`r` asks for a page of the bucket's listing."""
    if b.name == "s3":
        return "list-type=2" in r.target
    return r.method == "GET" and "/o?" in r.target


# What the two sockets' buffers may hold past what the client read when it closes (measured:
# 0.2 to 0.4 MB on loopback; the proxy's send buffer is 64 KB): the bound on the bytes the proxy
# got out beyond the client's own limit. The proxy stops at 128 MiB if the client never does.
IN_FLIGHT = 8 << 20


def read_within(proxy: faultproxy.Proxy, limit: int) -> faultproxy.Sent:
    """The one ENDLESS answer the proxy gave, once it is over: the client closed it, and the
    proxy got out no more than `limit` and what the sockets hold (counted, never timed)."""
    assert proxy.answered(300)  # over: the client closed it, or the proxy's cap
    ((_, sent),) = proxy.endless()
    assert sent.client_closed and sent.nbytes <= limit + IN_FLIGHT, sent
    return sent


@contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """This process's environment set to `env` for in-process readers (the store clients read
    it when they are made, at the first call)."""
    before = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(before)


def _reads(w: faults.World, b: Backend, env: dict[str, str], prefix: str, tally: faults.Tally,
           *, must_load: bool = False, pub: str | None = None) -> int:
    """A sealed reader of the prefix: never other bytes; with `must_load`, every entry. The
    number of entries loaded."""
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.trust.inputs.public_keys import load_public
    from jaxcache.trust.rules import target

    loaded = 0
    with environment(env):
        reader = BucketSealedCache(objects.open_store(target.parse_bucket(b.url(prefix))),
                                   trusted=[load_public(pub or w.pub)])
        try:
            for key, data in w.entries:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    got = reader.get(key)
                if got is not None and got != data:
                    tally.wrong_loads += 1
                    tally.fail(f"{b.name}: {key}: loaded bytes that are not the entry's")
                loaded += got == data
                if must_load and got != data:
                    tally.fail(f"{b.name}: {key}: not loaded after a complete publish "
                               f"({[m.reason for m in reader.misses][-1:]})")
        finally:
            reader.close()
    return loaded


def _verify(w: faults.World, b: Backend, env: dict[str, str], prefix: str,
            tally: faults.Tally) -> None:
    proc = jaxcache("verify", b.url(prefix), "--trusted-key", w.pub, "--format", "json",
                    env=env)
    if faults._internal(proc.stderr) or proc.returncode not in (0, 1):
        tally.internal_errors += 1
        tally.fail(f"{b.name}: verify rc {proc.returncode}: {proc.stderr[-400:]}")


def _publish(w: faults.World, b: Backend, env: dict[str, str], prefix: str,
             proxy: faultproxy.Proxy | None = None) -> subprocess.CompletedProcess[str]:
    """The publisher process (its PID handed to the proxy, for the KILL faults)."""
    proc = subprocess.Popen([sys.executable, "-c", PUBLISHER, b.url(prefix), str(w.key),
                             str(w.listing)], env={**env, "PYTHONPATH": str(paths.SRC)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proxy is not None:
        proxy.victim = proc.pid
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return subprocess.CompletedProcess(proc.args, None, out, err)  # type: ignore[arg-type]
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _ended(t: subprocess.CompletedProcess[str], b: Backend, tally: faults.Tally,
           killed_ok: bool) -> None:
    tally.trials += 1
    if t.returncode is None:
        tally.hangs += 1
        tally.fail(f"{b.name}: the publisher hung")
    elif t.returncode == -9 and killed_ok:
        pass
    elif t.returncode != 0 or faults._internal(t.stderr):
        tally.internal_errors += 1
        tally.fail(f"{b.name}: publisher rc {t.returncode}: {t.stderr[-500:]}")


def _complete(w: faults.World, b: Backend, clean: dict[str, str], prefix: str,
              tally: faults.Tally) -> None:
    """With the faults gone: what is there reads exactly, verify judges it, a clean publisher
    completes the prefix, and then every entry loads."""
    _reads(w, b, clean, prefix, tally)
    _verify(w, b, clean, prefix, tally)
    again = _publish(w, b, clean, prefix)
    if again.returncode != 0 or faults._internal(again.stderr):
        tally.internal_errors += 1
        tally.fail(f"{b.name}: the next publisher: rc {again.returncode}: "
                   f"{again.stderr[-500:]}")
    _reads(w, b, clean, prefix, tally, must_load=True)


def publish_reads(w: faults.World, b: Backend, prefix: str, seed: int, rate: float,
                  tally: faults.Tally) -> None:
    """A publisher, then three sealed readers, each through seeded faults on `rate` of its
    requests; then the checks without faults."""
    with faultproxy.Proxy(b.upstream) as clean_proxy, \
            faultproxy.Proxy(b.upstream, faultproxy.seeded(seed, rate, NOISE)) as noisy:
        env = b.env(noisy)
        _ended(_publish(w, b, env, prefix), b, tally, killed_ok=False)
        for _ in range(3):
            _reads(w, b, env, prefix, tally)
        tally.faults += len(noisy.faults())
        _complete(w, b, b.env(clean_proxy), prefix, tally)


def killed_publisher(w: faults.World, b: Backend, prefix: str, request: int, after: bool,
                     tally: faults.Tally) -> None:
    """The publisher killed at its `request`-th request (before the server saw it, or after
    it applied it); then the checks."""
    fault = Fault.KILL_AFTER if after else Fault.KILL_BEFORE
    with faultproxy.Proxy(b.upstream) as clean_proxy, \
            faultproxy.Proxy(b.upstream, faultproxy.at(request, fault)) as proxy:
        t = _publish(w, b, b.env(proxy), prefix, proxy)
        _ended(t, b, tally, killed_ok=True)
        tally.faults += t.returncode == -9
        _complete(w, b, b.env(clean_proxy), prefix, tally)


def requests_of_publish(w: faults.World, b: Backend, prefix: str) -> int:
    """How many requests a clean publish of the world's entries makes (its kill points)."""
    with faultproxy.Proxy(b.upstream) as proxy:
        t = _publish(w, b, b.env(proxy), prefix)
        assert t.returncode == 0, t.stderr[-2000:]
        return len(proxy.seen)


def job_reads(w: faults.World, b: Backend, prefix: str, seed: int, golden: dict,
              tally: faults.Tally) -> None:
    """A real JAX job, a sealed reader of the prefix through seeded faults: its numbers are
    the numbers without a cache, and it ends 0."""
    with faultproxy.Proxy(b.upstream, faultproxy.seeded(seed, 0.3, NOISE)) as noisy:
        env = b.env(noisy)
        proc = subprocess.run([sys.executable, str(paths.PROGRAMS / "sealed_job.py"),
                               b.url(prefix), w.pub], env=env, capture_output=True, text=True,
                              timeout=600)
        tally.faults += len(noisy.faults())
    tally.trials += 1
    if proc.returncode != 0:
        tally.internal_errors += 1
        tally.fail(f"{b.name}: the job failed: {proc.stderr[-800:]}")
        return
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if out["results"] != golden:
        tally.wrong_loads += 1
        tally.fail(f"{b.name}: the job's numbers changed: {out['results']} != {golden}")


COMMANDS = ("seal", "cosign", "gc")


def _upload_unsigned(w: faults.World, b: Backend, prefix: str) -> None:
    """The entries as a job wrote them (no signature), straight to the server."""
    for key, data in w.entries:
        b.upload(f"{prefix}/{key}-cache", data)


def _command(what: str, w: faults.World, url: str) -> list[str]:
    if what == "seal":
        return ["seal", url, "--signing-key", str(w.key), "--trust-bucket-writers"]
    if what == "cosign":
        return ["seal", url, "--signing-key", str(w.key2), "--add-signature", "--trusted-key",
                w.pub, "--trusted-key", w.pub2]
    return ["gc", url, "--max-size", "0"]


def _prepare(what: str, w: faults.World, b: Backend, prefix: str) -> None:
    if what == "seal":
        _upload_unsigned(w, b, prefix)
    else:
        with faultproxy.Proxy(b.upstream) as clean_proxy:
            assert _publish(w, b, b.env(clean_proxy), prefix).returncode == 0


def requests_of(what: str, w: faults.World, b: Backend, prefix: str) -> int:
    """How many requests a clean run of `what` makes on a prepared prefix."""
    _prepare(what, w, b, prefix)
    with faultproxy.Proxy(b.upstream) as proxy:
        proc = jaxcache(*_command(what, w, b.url(prefix)), env=b.env(proxy))
        assert proc.returncode == 0, proc.stderr[-2000:]
        return len(proxy.seen)


def killed_command(what: str, w: faults.World, b: Backend, prefix: str, request: int,
                   after: bool, tally: faults.Tally) -> None:
    """`what` (seal, gc) killed at its `request`-th request; then: no wrong load, verify
    judges the prefix, the next run completes, and after it every entry loads (seal) or none
    is left (gc)."""
    _prepare(what, w, b, prefix)
    fault = Fault.KILL_AFTER if after else Fault.KILL_BEFORE
    argv = _command(what, w, b.url(prefix))
    with faultproxy.Proxy(b.upstream) as clean_proxy, \
            faultproxy.Proxy(b.upstream, faultproxy.at(request, fault)) as proxy:
        proc = subprocess.Popen([sys.executable, "-m", "jaxcache", *argv],
                                env={**b.env(proxy), "PYTHONPATH": str(paths.SRC)},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        proxy.victim = proc.pid
        try:
            out, err = proc.communicate(timeout=300)
            t = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            t = subprocess.CompletedProcess(proc.args, None, out, err)  # type: ignore[arg-type]
        _ended(t, b, tally, killed_ok=True)
        tally.faults += t.returncode == -9
        clean = b.env(clean_proxy)
        _reads(w, b, clean, prefix, tally)
        _verify(w, b, clean, prefix, tally)
        again = jaxcache(*argv, env=clean)
        # gc ends 1 when what is left is not its to delete: a signature whose entry a killed
        # gc removed is younger than a publish takes (orphans.py), so it stays an hour
        ok = (0, 1) if what == "gc" else (0,)
        if again.returncode not in ok or faults._internal(again.stderr):
            tally.internal_errors += 1
            tally.fail(f"{b.name}: the next {what}: rc {again.returncode}: "
                       f"{again.stderr[-500:]}")
        if what == "seal":
            _reads(w, b, clean, prefix, tally, must_load=True)
        elif what == "cosign":  # by the first key all the while, by the co-signer's now
            _reads(w, b, clean, prefix, tally, must_load=True)
            _reads(w, b, clean, prefix, tally, must_load=True, pub=w.pub2)
        else:
            left = [n for n in b.names(prefix) if n.endswith("-cache")]
            if left:
                tally.fail(f"{b.name}: entries left after a complete gc to size 0: {left}")
