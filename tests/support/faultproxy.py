"""A fault-injecting HTTP proxy on loopback, in front of fake-gcs-server or SeaweedFS (issue 42).

Clients are pointed at it as at the server (STORAGE_EMULATOR_HOST, AWS_ENDPOINT_URL). Each
request is read whole, numbered, and handed to the plan, which picks a Fault: pass it on, answer
500 or 503 without forwarding, reset the connection (before the server saw the request, or after
it applied it: the ambiguous case), stall until the proxy stops, forward and then cut the body
short (with the true Content-Length, or with a length that lies either way), flip a byte of the
body, or kill the client process before or after forwarding (a publisher dying mid-upload, at a
request boundary chosen by number, not by time). Every answer closes its connection, so one
request is one connection and a fault never leaks into the next request.

`delay_s` holds every request that long before it goes on: a round trip to a distant store
(the bucket warm-start benchmark, issue 45).

A server that does not bound what it sends: the ENDLESS faults forward the request, pass its
answer off as the whole object (a 206 made 200, no Content-Range: the Range ignored) and send
it, then filler, until the client closes the connection (or `endless_max` bytes: a client
that never stops still ends), framed as chunks or under a Content-Length of a terabyte; or
answer 503 with such a body. `sent`
counts the bytes each such answer put on the wire before the client closed: what a bounded
client reads is that, less what the sockets' buffers held.

This kernel has no `tc netem`; a proxy also sees requests whole, which netem cannot.
"""

from __future__ import annotations

import contextlib
import enum
import os
import random
import signal
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

HEAD_MAX = 64 * 1024


class Fault(enum.Enum):
    PASS = "pass"
    STATUS_500 = "500"
    STATUS_503 = "503"
    RESET = "reset before the server sees it"
    RESET_AFTER = "reset after the server applied it"
    STALL = "stall"
    TRUNCATE = "body cut short (true length)"
    LONG_LENGTH = "length says more than the body"
    SHORT_LENGTH = "length says less than the body"
    CORRUPT = "one byte of the body flipped"
    KILL_BEFORE = "client killed before the server sees it"
    KILL_AFTER = "client killed after the server applied it"
    ENDLESS = "Range ignored: 200, a chunked body that never ends"
    ENDLESS_LENGTH = "Range ignored: 200, a length of a terabyte, a body that never ends"
    ENDLESS_ERROR = "503 with a chunked body that never ends"


ENDLESS = (Fault.ENDLESS, Fault.ENDLESS_LENGTH, Fault.ENDLESS_ERROR)
FILLER = b"x" * (1 << 16)


@dataclass(frozen=True)
class Request:
    index: int  # 1-based, in the order the proxy finished reading them
    method: str
    target: str  # path and query


Plan = Callable[[Request], Fault]


def always(fault: Fault) -> Plan:
    return lambda _r: fault


def seeded(seed: int, rate: float, kinds: tuple[Fault, ...]) -> Plan:
    """A fault from `kinds` on a seeded random share `rate` of requests (the same seed, the
    same sequence for the same requests)."""
    rng, lock = random.Random(seed), threading.Lock()

    def plan(_r: Request) -> Fault:
        with lock:
            return rng.choice(kinds) if rng.random() < rate else Fault.PASS
    return plan


def at(index: int, fault: Fault) -> Plan:
    """`fault` on the index-th request only."""
    return lambda r: fault if r.index == index else Fault.PASS


def on(target: Callable[[Request], bool], fault: Fault) -> Plan:
    """`fault` on every request `target` picks (by method and path), the others pass."""
    return lambda r: fault if target(r) else Fault.PASS


@dataclass(frozen=True)
class Sent:
    """What an ENDLESS answer put on the wire: bytes (head and body), and whether it ended
    because the client closed (else the proxy's own cap, or its close)."""

    nbytes: int
    client_closed: bool


@dataclass
class Proxy:
    upstream: tuple[str, int]
    plan: Plan = field(default=lambda _r: Fault.PASS)
    victim: int | None = None  # the client's PID, for the KILL faults
    # every request waits this long before it is forwarded: a round trip to a distant store
    # (issue 45's latency that users see), the same for every request, faults or not
    delay_s: float = 0.0
    endless_max: int = 128 << 20  # an ENDLESS answer stops here if the client never does
    port: int = 0
    seen: list[tuple[Request, Fault]] = field(default_factory=list)
    sent: dict[int, Sent] = field(default_factory=dict)  # ENDLESS answers, by request index
    _sock: socket.socket | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _serving: list[threading.Thread] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Proxy:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        self._sock, self.port = s, s.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def close(self) -> None:
        self._stop.set()  # also ends every stall
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()

    def __enter__(self) -> Proxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def faults(self) -> list[Fault]:
        with self._lock:
            return [f for _, f in self.seen if f is not Fault.PASS]

    def answered(self, timeout: float = 300.0) -> bool:
        """Wait until every request so far has had its answer (an ENDLESS one: until the
        client closed or the cap); False if one is still going after `timeout`."""
        with self._lock:
            threads = list(self._serving)
        for t in threads:
            t.join(timeout)
        return not any(t.is_alive() for t in threads)

    def endless(self) -> list[tuple[Request, Sent]]:
        """Each ENDLESS answer so far, with what it sent."""
        with self._lock:
            return [(r, self.sent[r.index]) for r, f in self.seen if r.index in self.sent]

    def _accept(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            with self._lock:  # started before answered() can see it (join needs a start)
                self._serving.append(t)
                t.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                head, body = _read_request(conn)
            except (OSError, ValueError):
                return
            method, target = head.split(b" ", 2)[:2]
            with self._lock:
                req = Request(len(self.seen) + 1, method.decode(), target.decode())
                fault = self.plan(req)
                self.seen.append((req, fault))
            if self.delay_s > 0 and self._stop.wait(self.delay_s):
                return  # closing: no answer
            if fault in ENDLESS:
                sent = self._endless(conn, fault, head, body)
                with self._lock:
                    self.sent[req.index] = sent
                return
            self._answer(conn, fault, head, body)

    def _endless(self, conn: socket.socket, fault: Fault, head: bytes, body: bytes) -> Sent:
        """The server's answer to the request without its Range (or a 503), then filler,
        until the client closes or `endless_max` bytes are out."""
        if fault is Fault.ENDLESS_ERROR:
            status, headers, payload = b"HTTP/1.1 503 Service Unavailable", \
                [b"Content-Type: text/plain"], b"busy "
        else:  # the ranged answer (the Range may be signed: S3) passed off as the whole
            status, headers, payload = _forward(self.upstream, head, body)
            if status.split(b" ")[1:2] == [b"206"]:
                status = b"HTTP/1.1 200 OK"
        chunked = fault is not Fault.ENDLESS_LENGTH
        out = [status, *(h for h in headers if not h.lower().startswith((
            b"content-length:", b"connection:", b"transfer-encoding:", b"content-range:")))]
        out.append(b"Transfer-Encoding: chunked" if chunked else
                   b"Content-Length: " + str(1 << 40).encode())
        out.append(b"Connection: close")
        # a small send buffer: what is on the wire at any moment is the client's to hold
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)
        conn.settimeout(0.5)  # to notice the proxy closing while a client does not read
        total, closed = 0, False

        def send(data: bytes) -> bool:
            nonlocal total, closed
            view = memoryview(data)
            while view:
                try:
                    n = conn.send(view)
                except TimeoutError:  # the client reads nothing for now
                    if self._stop.is_set():
                        return False
                    continue
                except OSError:  # a broken pipe, a reset: the client closed
                    closed = True
                    return False
                total, view = total + n, view[n:]
            return True

        def piece(data: bytes) -> bytes:
            return b"%x\r\n%b\r\n" % (len(data), data) if chunked else data

        if send(b"\r\n".join(out) + b"\r\n\r\n") and (not payload or send(piece(payload))):
            while total < self.endless_max and send(piece(FILLER)):
                pass
            if chunked and not closed and total >= self.endless_max:
                send(b"0\r\n\r\n")
        return Sent(total, closed)

    def _answer(self, conn: socket.socket, fault: Fault, head: bytes, body: bytes) -> None:
        if fault in (Fault.STATUS_500, Fault.STATUS_503):
            code = b"500 Internal Server Error" if fault is Fault.STATUS_500 else \
                b"503 Service Unavailable"
            msg = b"injected by the fault proxy"
            conn.sendall(b"HTTP/1.1 " + code + b"\r\nContent-Type: text/plain\r\n"
                         b"Content-Length: " + str(len(msg)).encode() +
                         b"\r\nConnection: close\r\n\r\n" + msg)
            return
        if fault is Fault.RESET:
            return _reset(conn)
        if fault is Fault.STALL:
            self._stop.wait(600)  # until the proxy closes: the client's deadline must end it
            return
        if fault is Fault.KILL_BEFORE:
            return self._kill()
        status, headers, payload = _forward(self.upstream, head, body)
        if fault is Fault.RESET_AFTER:
            return _reset(conn)
        if fault is Fault.KILL_AFTER:
            return self._kill()
        length = len(payload)
        if fault is Fault.TRUNCATE and payload:
            payload = payload[:len(payload) // 2]
        elif fault is Fault.LONG_LENGTH:
            length = len(payload) + 100
        elif fault is Fault.SHORT_LENGTH and payload:
            length = len(payload) // 2
        elif fault is Fault.CORRUPT and payload:
            i = len(payload) // 2
            payload = payload[:i] + bytes([payload[i] ^ 0xFF]) + payload[i + 1:]
        out = [status]
        out += [h for h in headers if not h.lower().startswith((b"content-length:",
                                                                 b"connection:",
                                                                 b"transfer-encoding:"))]
        if not (head.startswith(b"HEAD ") or status.split(b" ")[1:2] in ([b"204"], [b"304"])):
            out.append(b"Content-Length: " + str(length).encode())
        else:  # no body follows: the server's own length stands
            out += [h for h in headers if h.lower().startswith(b"content-length:")]
            payload = b""
        out.append(b"Connection: close")
        with contextlib.suppress(OSError):
            conn.sendall(b"\r\n".join(out) + b"\r\n\r\n" + payload)

    def _kill(self) -> None:
        if self.victim is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.victim, signal.SIGKILL)


def _reset(conn: socket.socket) -> None:
    """Close with RST (SO_LINGER 0): the client sees 'connection reset by peer'."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _read_request(conn: socket.socket) -> tuple[bytes, bytes]:
    """The request line and headers (CRLF-joined, without the blank line) and the body
    (Content-Length or chunked, re-framed by its length for the upstream)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk or len(buf) > HEAD_MAX:
            raise ValueError("no whole request")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length, chunked, expect = 0, False, False
    for h in lines[1:]:
        name, _, value = h.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
        elif name.strip().lower() == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
        elif name.strip().lower() == b"expect" and b"100-continue" in value.lower():
            expect = True  # botocore's PUTs wait for it before sending the body
    if expect:
        lines = [h for h in lines if not h.lower().startswith(b"expect:")]
        if not rest:
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    if chunked:
        body = _dechunk(conn, rest)
        lines = [h for h in lines if not h.lower().startswith(b"transfer-encoding:")]
        lines.append(b"Content-Length: " + str(len(body)).encode())
    else:
        body = rest
        while len(body) < length:
            chunk = conn.recv(min(1 << 20, length - len(body)))
            if not chunk:
                raise ValueError("body cut short")
            body += chunk
    lines = [h for h in lines if not h.lower().startswith(b"connection:")]
    return b"\r\n".join([*lines, b"Connection: close"]), body


def _dechunk(conn: socket.socket, buf: bytes) -> bytes:
    body = b""
    while True:
        while b"\r\n" not in buf:
            buf += conn.recv(65536)
        size_line, _, buf = buf.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        while len(buf) < size + 2:
            chunk = conn.recv(65536)
            if not chunk:
                raise ValueError("chunk cut short")
            buf += chunk
        if size == 0:
            return body  # trailers (rare here) are dropped
        body, buf = body + buf[:size], buf[size + 2:]


def _forward(upstream: tuple[str, int], head: bytes, body: bytes
             ) -> tuple[bytes, list[bytes], bytes]:
    """Send the request, read the answer to its end (Connection: close): status line,
    headers, body (a chunked answer is joined)."""
    with socket.create_connection(upstream, timeout=60) as up:
        up.sendall(head + b"\r\n\r\n" + body)
        data = b""
        while True:
            chunk = up.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    raw_head, _, payload = data.partition(b"\r\n\r\n")
    lines = raw_head.split(b"\r\n")
    if any(h.lower().startswith(b"transfer-encoding:") and b"chunked" in h.lower()
           for h in lines[1:]):
        payload = _join_chunks(payload)
    return lines[0], lines[1:], payload


def _join_chunks(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out, data = out + data[:size], data[size + 2:]
    return out
