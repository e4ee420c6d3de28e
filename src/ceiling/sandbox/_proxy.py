"""The build sandbox's only way out: an HTTP proxy on the host that reaches the package
registries and nothing else.

A build runs in a network namespace of its own with only a loopback. Its PID 1 listens on
``127.0.0.1:3128`` there and hands the listening socket to the host, where this proxy
accepts the build's connections (so no process inside holds anything of the host), and
every step gets ``http_proxy``/``https_proxy`` pointing at it (pip, apt, npm, curl, git).
The proxy accepts ``CONNECT host:443`` and absolute-URI ``GET``/``HEAD`` requests on port 80
to the hosts of :func:`registry_hosts` only, and answers ``403`` to anything else; it never
resolves a name the build chose for any other host, so a step reaches neither the host's
loopback services nor its LAN, the metadata service or the internet at large.

Allowed: PyPI (``pypi.org``, ``files.pythonhosted.org``), the hosts of the pip index URLs
configured here (``PIP_INDEX_URL``/``PIP_EXTRA_INDEX_URL``, ``pip config``), the hosts of
apt's sources (``/etc/apt/sources.list``, ``sources.list.d``), ``registry.npmjs.org``, and
``CEILING_BUILD_HOSTS`` (comma separated) for an operator's mirror.
"""

from __future__ import annotations

import os
import re
import select
import socket
import subprocess
import threading
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_HOSTS = ("pypi.org", "files.pythonhosted.org", "registry.npmjs.org",
                 "deb.debian.org", "security.debian.org")


def registry_hosts() -> frozenset[str]:
    """The hosts a build may reach (module doc)."""
    hosts = set(DEFAULT_HOSTS)
    urls: list[str] = []
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        urls += os.environ.get(var, "").split()
    try:
        out = subprocess.run(["pip", "config", "list"], capture_output=True, text=True,
                             timeout=20, check=False).stdout
        for line in out.splitlines():
            if "index-url" in line:
                urls += line.split("=", 1)[1].strip().strip("'\"").split()
    except (OSError, subprocess.TimeoutExpired):
        pass
    apt = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for p in apt:
        try:
            text = p.read_text()
        except OSError:
            continue
        urls += re.findall(r"(?:^URIs:|^deb(?:-src)?(?:\s+\[[^\]]*\])?)\s+(\S+)", text, re.MULTILINE)
    for u in urls:
        host = urlsplit(u).hostname
        if host:
            hosts.add(host.lower())
    hosts.update(h.strip().lower() for h in os.environ.get("CEILING_BUILD_HOSTS", "").split(",")
                 if h.strip())
    return frozenset(hosts)


class RegistryProxy:
    """The proxy (module doc), accepting on ``listener`` (the build's ``127.0.0.1:3128``,
    a listening socket of the build's own network namespace that its PID 1 handed over)
    from a daemon thread until :meth:`close`. ``refused`` lists what it turned away."""

    def __init__(self, listener: socket.socket, hosts: frozenset[str] | None = None) -> None:
        self.hosts = hosts if hosts is not None else registry_hosts()
        self.refused: list[str] = []
        self._sock = listener
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True,
                                        name="ceiling-build-proxy")
        self._thread.start()

    def close(self) -> None:
        self._stop = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _allowed(self, host: str) -> bool:
        return host.lower().rstrip(".") in self.hosts

    def _handle(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(60)
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            line, _, rest = head.partition(b"\r\n")
            parts = line.decode("latin-1").split()
            if len(parts) != 3:
                return self._deny(conn, "malformed request")
            method, target, version = parts
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                if port != "443" or not self._allowed(host.strip("[]")):
                    return self._deny(conn, target)
                up = socket.create_connection((host.strip("[]"), 443), timeout=30)
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                body = head.partition(b"\r\n\r\n")[2]
            else:
                url = urlsplit(target)
                if method not in ("GET", "HEAD") or url.scheme != "http" or not url.hostname \
                        or (url.port or 80) != 80 or not self._allowed(url.hostname):
                    return self._deny(conn, f"{method} {target}")
                up = socket.create_connection((url.hostname, 80), timeout=30)
                path = url.path or "/"
                if url.query:
                    path += "?" + url.query
                headers = [h for h in rest.partition(b"\r\n\r\n")[0].split(b"\r\n")
                           if h and not h.lower().startswith((b"proxy-", b"connection:"))]
                req = b"\r\n".join([f"{method} {path} {version}".encode(), *headers,
                                    b"Connection: close", b"", b""])
                up.sendall(req)
                body = b""
            if body:
                up.sendall(body)
            self._pipe(conn, up)
        except OSError:
            pass
        finally:
            conn.close()

    def _deny(self, conn: socket.socket, what: str) -> None:
        self.refused.append(what)
        conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                     + b"")

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        a.settimeout(None)
        b.settimeout(None)
        try:
            socks = [a, b]
            while socks:
                ready, _, _ = select.select(socks, [], [], 300)
                if not ready:
                    return
                for s in ready:
                    data = s.recv(65536)
                    other = b if s is a else a
                    if not data:
                        try:
                            other.shutdown(socket.SHUT_WR)
                        except OSError:
                            pass
                        socks.remove(s)
                    else:
                        other.sendall(data)
        finally:
            b.close()


__all__ = ["DEFAULT_HOSTS", "RegistryProxy", "registry_hosts"]
