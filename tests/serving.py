"""A real reward server in a thread of the test process, for the server and client tests."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from reward_sandbox import Grader
from reward_sandbox.cache import ResultCache
from reward_sandbox.service.server import ServerOptions, make_server

from .conftest import TEST_LIMITS


def free_port() -> int:
    """A loopback port nobody listens on (a dead server's address, or one to start a server on)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    port: int
    server: Any  # the uvicorn.Server: tests read its connections and flags

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextlib.contextmanager
def serving(token: str | None, options: ServerOptions | None = None, workers: int = 2) -> Iterator[Served]:
    """``reward-sandbox serve`` as :func:`make_server` builds it (guards included), on a fresh
    loopback port with its own grader; started before the body runs, stopped and joined after."""
    grader = Grader(workers=workers, limits=TEST_LIMITS, cache=ResultCache())
    port = free_port()
    server = make_server(grader, token, options or ServerOptions(), "127.0.0.1", port)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the reward server on port {port} did not start")
            time.sleep(0.05)
        yield Served(port, server)
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        grader.close()
