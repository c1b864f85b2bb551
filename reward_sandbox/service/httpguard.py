"""Connection-level guards for the reward server, as a uvicorn HTTP protocol.

uvicorn alone lets a client hold a connection forever by sending half a request (its keep-alive
timer only runs between requests), and its ``limit_concurrency`` answers 503 to everyone once idle
connections fill it, ``/healthz`` included. This protocol adds:

* a read deadline: a request (headers and body) must arrive in full within ``read_timeout_s`` of
  the connection opening or of the previous response; otherwise the connection is dropped (with a
  408 if part of a request had come);
* a write deadline: a connection whose client stops reading (the transport pauses writing) must
  drain within ``read_timeout_s`` or it is aborted; and at most ``max_pipelined`` requests are
  answered back to back from what a client sent ahead without reading, then it is closed. Without
  these, a client that pipelines requests and never reads holds its slot forever;
* a connection cap: at ``max_connections`` a new connection evicts the oldest connection that is
  not in the middle of a request (idle, still sending headers, or stuck with its reader not
  reading); when every connection is busy with a real request, the newcomer gets a 503 and is closed.

Also: at most ``max_per_ip`` connections from one address (its own idle ones are evicted first);
a request line + headers over 16 KiB is refused with a 400 even when it arrives in one read (h11
bounds only a head still incomplete); a request answered before its body was read (a 413, a 404)
closes the connection instead of draining the body.

Every close of a connection whose client is still sending (a 413 mid-body, a 408) is a *lingering
close*: the answer is sent, the write side shut, and what the client still sends is read and
dropped for at most ``LINGER_S`` seconds and ``LINGER_BYTES`` bytes before the socket closes.
Closing at once with the client's bytes unread makes the kernel send a reset, which can destroy
the answer before the client reads it.

Body size is bounded by the application, which reads the body as a stream (uvicorn buffers at
most 64 KiB of it before pausing the socket), so chunked bodies are bounded too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_HEAD = 16 * 1024  # request line and headers
LINGER_S = 2.0  # how long an answered connection's unread body is drained, at most
LINGER_BYTES = 4 * 1024 * 1024  # and how much of it


def _answer(status: str, message: bytes) -> bytes:
    """A whole response sent by the guard itself, outside any h11 request cycle; the connection closes."""
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\nconnection: close\r\n"
        f"content-length: {len(message)}\r\n\r\n".encode()
        + message
    )


_REFUSED = _answer("503 Service Unavailable", b'{"error": "too many connections, retry later"}')
_REFUSED_IP = _answer("503 Service Unavailable", b'{"error": "too many connections from your address, retry later"}')
_TOO_SLOW = _answer("408 Request Timeout", b'{"error": "the request did not arrive in time"}')
_HEAD_TOO_LARGE = _answer("400 Bad Request", b'{"error": "request line and headers over 16 KiB"}')


def head_too_large(buffer: bytes) -> bool:
    """The request at the start of ``buffer`` has a head (request line + headers) over MAX_HEAD.
    h11 bounds only a head still incomplete; one that arrives whole in a single read is not."""
    end = buffer.find(b"\r\n\r\n", 0, MAX_HEAD + 4)
    return end < 0 and len(buffer) > MAX_HEAD


class Drops:
    """Connections the guard closed, by reason (read by ``/metrics``; guarded, the app runs threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts = Counter[str]()

    def add(self, reason: str) -> None:
        with self.lock:
            self.counts[reason] += 1

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return dict(self.counts)


class _QuietBadRequests(logging.Filter):
    """uvicorn logs a warning per unparsable request; under attack that is a line per attempt.
    They are counted in /metrics (code 400) instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "Invalid HTTP request received."


logging.getLogger("uvicorn.error").addFilter(_QuietBadRequests())


class _LingeringTransport:
    """The transport as uvicorn and the guard see it: ``close()`` while the client is still sending
    a request becomes the protocol's lingering close; everything else is the real transport's."""

    def __init__(self, transport: asyncio.Transport, linger: Callable[[], bool]) -> None:
        self.raw = transport
        self._linger = linger  # starts a lingering close if one is due; says whether it did
        self.lingering = False

    def close(self) -> None:
        if self.lingering:
            return
        if self.raw.is_closing() or not self._linger():
            self.raw.close()

    def is_closing(self) -> bool:
        return self.lingering or self.raw.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def guarded_protocol(
    read_timeout_s: float,
    max_connections: int,
    drops: Drops,
    responded: Callable[[int], None],
    max_pipelined: int = 32,
    max_per_ip: int = 0,
) -> type:
    """An :class:`H11Protocol` subclass with these limits (pass it as ``uvicorn.Config(http=...)``);
    ``responded`` counts the responses it sends itself (400 for unparsable HTTP or an oversized head,
    408 for a half-sent request, 503 at the caps)."""

    class GuardedProtocol(H11Protocol):  # type: ignore[misc]  # uvicorn.* is untyped here
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._deadline: asyncio.TimerHandle | None = None
            self._opened = time.monotonic()
            self._admitted = False
            self._ip = ""
            self._write_deadline: asyncio.TimerHandle | None = None
            self._pipelined = 0  # responses in a row sent while the next request was already buffered
            self._drained = 0  # bytes read and dropped while lingering

        def connection_made(self, transport: asyncio.Transport) -> None:
            peer = transport.get_extra_info("peername")
            self._ip = str(peer[0]) if isinstance(peer, tuple) and peer else ""
            if max_per_ip and self._ip:
                same = [c for c in self.connections if isinstance(c, GuardedProtocol) and c._ip == self._ip]
                if len(same) >= max_per_ip and not self._evict_one(same):
                    drops.add("per_ip_limit")
                    responded(503)
                    transport.write(_REFUSED_IP)
                    transport.close()
                    return
            if len(self.connections) >= max_connections and not self._evict_one():
                drops.add("connection_limit")
                responded(503)
                transport.write(_REFUSED)
                transport.close()
                return
            self._admitted = True
            super().connection_made(_LingeringTransport(transport, self._linger))
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            self._disarm_write()
            if self._admitted:
                super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self.transport.lingering:
                self._drained += len(data)
                if self._drained > LINGER_BYTES:
                    self.transport.raw.close()
                return
            if self.conn.their_state is h11.IDLE and head_too_large(self.conn.trailing_data[0] + data):
                self._refuse_head()
                return
            super().data_received(data)
            self._watch()

        def _refuse_head(self) -> None:
            responded(400)
            self.transport.write(_HEAD_TOO_LARGE)
            self.transport.close()

        def on_response_complete(self) -> None:
            if self.transport.lingering:
                return  # answered and closing: nothing more is read or sent
            if self.conn.trailing_data[0] and not self.transport.is_closing():
                self._pipelined += 1
                if self._pipelined > max_pipelined:  # sent far ahead without reading: not served further
                    drops.add("pipelining")
                    self.transport.abort()
                    return
            else:
                self._pipelined = 0
            if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
                # answered before its body was read (a 404, /healthz with a body): close, do not drain
                drops.add("unread_body")
                self.transport.close()
                return
            if self.conn.trailing_data[0] and head_too_large(self.conn.trailing_data[0]):
                self._refuse_head()  # the next pipelined request
                return
            super().on_response_complete()
            self._disarm()  # a fresh deadline for the next request on this connection
            self._watch()

        def _linger(self) -> bool:
            """If the client is still sending a request: shut the write side once the answer is out,
            read and drop the rest for a bounded time, then close (see the module docstring)."""
            sending = self.conn.their_state is h11.SEND_BODY or self.conn.trailing_data[0] != b""
            raw = self.transport.raw
            if not sending or not raw.can_write_eof():
                return False
            self.transport.lingering = True
            self._disarm()
            raw.write_eof()
            raw.resume_reading()  # uvicorn pauses reading while a body waits for the app
            self.loop.call_later(min(LINGER_S, read_timeout_s), raw.close)
            return True

        def eof_received(self) -> None:
            if self.transport.lingering:
                self.transport.raw.close()  # the client is done sending: nothing left to drain
            super().eof_received()

        def pause_writing(self) -> None:
            super().pause_writing()
            if self._write_deadline is None:
                self._write_deadline = self.loop.call_later(read_timeout_s, self._write_expired)

        def resume_writing(self) -> None:
            super().resume_writing()
            self._disarm_write()

        def _disarm_write(self) -> None:
            if self._write_deadline is not None:
                self._write_deadline.cancel()
                self._write_deadline = None

        def _write_expired(self) -> None:
            """The client did not read its answers in time; ``abort`` (``close`` would wait for the
            unsent bytes, which is forever)."""
            self._write_deadline = None
            if self._admitted:
                drops.add("write_timeout")
                self.transport.abort()

        def send_400_response(self, msg: str) -> None:
            """uvicorn's answer to an unparsable request, with our JSON error body instead of its text."""
            responded(400)
            body = json.dumps({"error": f"malformed HTTP request: {msg}"}).encode()
            headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
            for event in (
                h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event))
            self.transport.close()

        def _idle(self) -> bool:
            """Not in the middle of a request: nothing received yet, only part of the headers, or
            answered and lingering."""
            if self.transport.lingering:
                return True
            return self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)

        def _stuck(self) -> bool:
            """Its client is not reading what it was sent (writing paused)."""
            return bool(self.flow is not None and self.flow.write_paused)

        def _evict_one(self, among: list[Any] | None = None) -> bool:
            pool = self.connections if among is None else among
            guarded = [c for c in pool if isinstance(c, GuardedProtocol)]
            stuck = [c for c in guarded if c._stuck()]
            if stuck:
                oldest = min(stuck, key=lambda c: c._opened)
                drops.add("evicted_stuck")
                oldest.transport.abort()
            else:
                idle = [c for c in guarded if c._idle()]
                if not idle:
                    return False
                oldest = min(idle, key=lambda c: c._opened)
                drops.add("evicted_idle")
                if oldest.transport.get_write_buffer_size():
                    oldest.transport.abort()  # its client is not reading: close() would wait on it forever
                else:
                    oldest.transport.raw.close()  # no answer to protect: no lingering
            self.connections.discard(oldest)
            return True

        def _watch(self) -> None:
            """Armed while a request is still arriving; off once it is in (the app's time is not limited)."""
            if self.transport.is_closing():
                self._disarm()
            elif self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
                self._arm()
            else:
                self._disarm()

        def _arm(self) -> None:
            if self._deadline is None:
                self._deadline = self.loop.call_later(read_timeout_s, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            if self.transport.is_closing():
                return
            partial = self.conn.their_state is h11.SEND_BODY or self.conn.trailing_data[0] != b""
            drops.add("read_timeout" if partial else "idle_timeout")
            if partial and (self.cycle is None or not self.cycle.response_started):
                responded(408)  # a half-sent request is told why (a silent connection just closes)
                self.transport.write(_TOO_SLOW)
            self.transport.close()

    return GuardedProtocol
