"""Standard input/output for the MCP server when the embedded local cloud runs in the same process.

Why not the SDK's own ``stdio_server()`` there: it reads stdin with ``anyio.wrap_file``, i.e. each
``readline`` runs in an anyio worker thread started after the local cloud. That thread sits in a C-level
``read()`` on the pipe while a tool runs, and the local cloud's virtual clock moves only when every thread
of the process other than its driver is blocked in a wait it recognises (``localcloud/clock.py``,
"quiescent"): a thread in ``read()`` looks busy, so the first tool that runs the simulation (``status``,
``reserve``) never saw the clock settle and hung until the hang detector's ``ClockStuckError``.

Here one reader thread of our own reads the wire and is registered with the clock as infrastructure
(:meth:`localcloud.clock.VirtualClock.ignore_thread`, as ``serve``'s HTTP thread is); replies are written
from the event loop's thread. As the SDK does, file descriptors 0 and 1 are diverted while serving (0 to
the null device, 1 to standard error), so that nothing else in the process can read the client's messages
or write into the protocol stream; both are restored on exit.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import BinaryIO, cast

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream


class WireReader:
    """The client's messages, one line each, read by a thread the clock ignores (``async for line in``)."""

    def __init__(self, wire: BinaryIO, ignore_thread: Callable[[threading.Thread], None]) -> None:
        self._wire = wire
        self._ignore_thread = ignore_thread
        self._send: MemoryObjectSendStream[str]
        self._receive: MemoryObjectReceiveStream[str]
        self._send, self._receive = anyio.create_memory_object_stream[str](16)

    def start(self) -> None:
        """Start the reader thread (call from inside the event loop)."""
        token = anyio.lowlevel.current_token()

        def read() -> None:
            try:
                for raw in iter(self._wire.readline, b""):
                    line = raw.decode("utf-8", errors="replace")
                    anyio.from_thread.run(self._send.send, line, token=token)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, RuntimeError):
                return  # the server stopped first (RuntimeError: its event loop is closed)
            with contextlib.suppress(RuntimeError):
                anyio.from_thread.run(self._send.aclose, token=token)  # end of input: the client left

        thread = threading.Thread(target=read, name="mcp-stdin", daemon=True)
        thread.start()
        self._ignore_thread(thread)

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async with self._receive:
            async for line in self._receive:
                yield line


class WireWriter:
    """The server's replies, written and flushed from the event loop's thread (a line each)."""

    def __init__(self, wire: BinaryIO) -> None:
        self._wire = wire

    async def write(self, text: str) -> int:
        """Write ``text`` (UTF-8) to the client."""
        return self._wire.write(text.encode("utf-8"))

    async def flush(self) -> None:
        """Flush what was written."""
        self._wire.flush()


@contextlib.contextmanager
def claimed_stdio() -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """The client's wire as private file objects; fds 0 and 1 point at the null device and at standard
    error meanwhile (restored on exit)."""
    wire_in_fd, wire_out_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    wire_in = os.fdopen(wire_in_fd, "rb", closefd=False)
    wire_out = os.fdopen(wire_out_fd, "wb", closefd=False)
    try:
        yield cast(BinaryIO, wire_in), cast(BinaryIO, wire_out)
    finally:
        with contextlib.suppress(OSError, ValueError):
            wire_out.flush()
        os.dup2(wire_in_fd, 0)
        os.dup2(wire_out_fd, 1)
        # The reader thread may still block on wire_in_fd: it is left open (closefd=False), as the SDK does.
        os.close(wire_out_fd)
