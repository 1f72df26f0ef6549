"""Relay one MCP stdio session to a forecast-env MCP server listening on a Unix socket.

Standard library only, so it can be copied into a harness's sandbox that has neither this package nor the
network: the harness's MCP client configuration runs `python3 mcp_relay.py /run/forecast-env/mcp.sock`, and
`forecast-env mcp --transport unix --socket ...` runs outside the sandbox (README, "Sandbox a harness").
"""

from __future__ import annotations

import io
import socket
import sys
import threading


def relay(path: str) -> int:
    """Copy stdin to the socket and the socket to stdout until either side closes."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as exc:
        print(f"mcp_relay: cannot connect to {path}: {exc}", file=sys.stderr)
        return 2

    stdin = sys.stdin.buffer
    # read1: what is there now (a message must not wait for 64 KiB more); a raw stream reads so by itself
    read = stdin.read1 if isinstance(stdin, io.BufferedIOBase) else stdin.read

    def upstream() -> None:
        try:
            while chunk := read(65536):
                sock.sendall(chunk)
        except OSError:
            pass
        finally:
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    threading.Thread(target=upstream, daemon=True).start()
    while chunk := sock.recv(65536):
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: mcp_relay.py SOCKET_PATH", file=sys.stderr)
        sys.exit(2)
    sys.exit(relay(sys.argv[1]))
