#!/usr/bin/env python3
"""Hostile and unlucky clients for bench/flood.sh (stdlib only).

  flood.py guest-flood FLUX_SOCKET SECONDS [START_AT]
      Flux local connector: pipeline resource.status requests and never
      read a reply; when the daemon drops the connection, connect again.
      Prints the number of requests written and connections dropped.
  flood.py stalled-journal UNIX_SOCKET SECONDS [START_AT]
      HTTP: open a resource.journal stream, read nothing, hold it.
  START_AT (seconds since the epoch): wait until then before the load
  starts, so that the interpreter's own start-up is not part of it.
"""
import socket
import struct
import sys
import time


def put(out, d):
    if len(d) < 255:
        out.append(len(d))
    else:
        out.append(0xFF)
        out.extend(struct.pack(">I", len(d)))
    out.extend(d)


def flux_request(topic, tag):
    b = bytearray()
    put(b, b"")
    put(b, topic.encode())
    proto = bytes([0x8E, 1, 1, 0x08 | 0x01]) + struct.pack(">IIII", 0xFFFFFFFF, 0, 0xFFFFFFFF, tag)
    put(b, proto)
    return struct.pack("=I", 0xFFEE0012) + struct.pack(">I", len(b)) + bytes(b)


def guest_flood(path, seconds):
    end = time.time() + seconds
    written = dropped = refused = 0
    batch = b"".join(flux_request("resource.status", t) for t in range(1, 65))
    while time.time() < end:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            hs = s.recv(1)
            if hs != b"\x00":
                refused += 1
                s.close()
                time.sleep(0.05)
                continue
            s.settimeout(2)
            while time.time() < end:
                s.sendall(batch)
                written += 64
        except (BrokenPipeError, ConnectionResetError, socket.timeout, OSError):
            dropped += 1
        finally:
            s.close()
    print(f"guest-flood: {written} requests written, {dropped} connections dropped by the daemon, {refused} refused")


def stalled_journal(path, seconds):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(path)
    s.sendall(b"POST /v1/resource.journal HTTP/1.1\r\nhost: x\r\nx-roster-streaming: 1\r\n"
              b"content-length: 2\r\n\r\n{}")
    time.sleep(seconds)
    # Now read what is there: the stream ends with the overflow error if
    # the daemon gave up on us.
    s.setblocking(True)
    s.settimeout(5)
    got = b""
    try:
        while True:
            d = s.recv(1 << 20)
            if not d:
                break
            got += d
            if got.endswith(b"\r\n0\r\n\r\n"):
                break
    except socket.timeout:
        pass
    tail = got[-300:].decode("utf-8", "replace").replace("\r\n", " ")
    print(f"stalled-journal: {len(got)} bytes after the stall; tail: {tail}")


if __name__ == "__main__":
    cmd, path, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
    run = {"guest-flood": guest_flood, "stalled-journal": stalled_journal}[cmd]
    if len(sys.argv) > 4:
        # START_AT (seconds since the epoch): the interpreter starts now,
        # the load at that moment (with the other loads).
        try:
            start_at = float(sys.argv[4])
        except ValueError:
            sys.exit(f"flood.py: START_AT: not seconds since the epoch: {sys.argv[4]!r}")
        time.sleep(max(0.0, start_at - time.time()))
    run(path, secs)
