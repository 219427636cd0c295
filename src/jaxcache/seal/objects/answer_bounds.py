"""How far an object store's HTTP answer is read: never past what its request asked for,
whatever the server sends.

A download asks for a range (`Range: bytes=0-N`: the size trusted keys vouch for, plus one to
tell a longer object); a server may ignore it and send the whole object (200), a length that
lies, or a chunked body that never ends, and both clients would read all of it into memory
before jaxcache sees a byte (the Cloud Storage client's download, and both clients' reading
of every error or listing answer whole). So each store hands every answer's body through
`bounded` before its client reads it (gcs_store.py: a response hook on the client's session;
s3_store.py: botocore's before-send event): an answer that its framing already bounds within
the limit (a Content-Length no larger, no chunks) is left as it is; any other is read through
`Capped`, which reads the socket no further than the limit and then closes the connection:
- a ranged answer (2xx) stops at the range's length, as a server that kept the Range would
  have: the caller judges the bytes (a sealed reader's `limit` is the signed size plus one,
  so an entry longer than signed is rejected as any wrong entry is);
- any other answer (JSON, XML, an error's text) stops at ANSWER_MAX, raising TooLong: a
  listing page of 1,000 objects with the longest names is a few MB.
"""

from __future__ import annotations

from jaxcache.seal.objects.http_answers import asked_length, body_length
from jaxcache.text import size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Protocol

    class Body(Protocol):
        """An answer's body as both clients read it (urllib3's HTTPResponse)."""

        def read(self, amt: int | None = ..., decode_content: bool | None = ...) -> bytes: ...

        def close(self) -> None: ...

ANSWER_MAX = 16 << 20  # bytes of any answer that is not a ranged download
CHUNK = 1 << 16  # bytes asked of the socket at a time past the answer's own framing
_NO_BODY = (204, 304)


class TooLong(Exception):
    """The server's answer ran past the bytes this request may read: not read further."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the server's answer ran past {size(limit)} (a length it did not "
                         f"keep, or a body that never ends): not read further")
        self.limit = limit


def bounded(body: Body, method: str, status: int, asked: Mapping[str, object],
            answered: Mapping[str, object]) -> Body:
    """`body` as its client may read it: as it is where the answer's own framing bounds it
    within the limit (HEAD, no body, or a Content-Length no larger and no chunks); else
    through Capped. `asked`, `answered`: the request's headers, the answer's."""
    if method.upper() == "HEAD" or status in _NO_BODY:
        return body
    ranged = asked_length(asked) if 200 <= status < 300 else None
    limit = ANSWER_MAX if ranged is None else ranged
    declared = body_length(answered)
    if declared is not None and declared <= limit:
        return body  # http.client reads no more than the length
    return Capped(body, limit, cut=ranged is not None)


class Capped:
    """A body read to at most `limit` bytes; past that the connection is closed and the
    answer ends there (`cut`: the ranged bytes, for the caller to judge) or raises TooLong.
    Everything else is the wrapped body's."""

    def __init__(self, body: Body, limit: int, *, cut: bool) -> None:
        self._body, self._limit, self._cut = body, limit, cut
        self._read = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._body, name)

    def read(self, amt: int | None = None, decode_content: bool | None = None,
             cache_content: bool = False) -> bytes:
        """urllib3's read (nothing is cached): at most `amt`, in pieces of at most CHUNK, so
        an answer of unknown length costs memory only as it arrives."""
        out = bytearray()
        while amt is None or len(out) < amt:
            piece = self._piece(CHUNK if amt is None else min(CHUNK, amt - len(out)),
                                decode_content)
            if not piece:
                break
            out += piece
        return bytes(out)

    def _piece(self, want: int, decode_content: bool | None) -> bytes:
        room = self._limit - self._read
        if room <= 0 and self._cut:
            self._body.close()  # as far as the range asked: the rest is never read
            return b""
        # one byte past the limit tells an answer that runs on from one that ends there
        piece = self._body.read(min(want, room if self._cut else room + 1),
                                decode_content=decode_content)
        self._read += len(piece)
        if self._read > self._limit:
            self._body.close()
            raise TooLong(self._limit)
        return piece

    def readinto(self, buffer: bytearray | memoryview) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def stream(self, amt: int | None = CHUNK, decode_content: bool | None = None
               ) -> Iterator[bytes]:
        while data := self.read(amt or CHUNK, decode_content):
            yield data

    def close(self) -> None:
        self._body.close()
