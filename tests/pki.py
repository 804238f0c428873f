"""Throwaway TLS material for tests: a ``trustme`` CA and a server certificate written as PEM
files (the test is skipped with one line when trustme is not installed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class ServerPki:
    """``ca`` (the ``trustme.CA``, to issue more certificates) and the paths of its PEM
    certificate, the server's certificate chain and the server's private key."""

    ca: Any
    ca_path: str
    cert_path: str
    key_path: str


def server_pki(directory: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> ServerPki:
    """A new CA and a certificate for ``hosts`` signed by it, written to ``directory``
    (``ca.pem``, ``server.pem``, ``server.key``)."""
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert(*hosts)
    ca_path, cert_path, key_path = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    ca.cert_pem.write_to_path(str(ca_path))
    for blob in cert.cert_chain_pems:
        blob.write_to_path(str(cert_path), append=True)
    cert.private_key_pem.write_to_path(str(key_path))
    return ServerPki(ca, str(ca_path), str(cert_path), str(key_path))
