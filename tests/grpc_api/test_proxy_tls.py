"""``dev --grpc-port --grpc-tls-cert --grpc-tls-key``: the gRPC port serves TLS only; this SDK
(``use_tls`` with the CA) and the official 5.x client (``tls_enable``) send over it, a plaintext
client is refused. The pair is self-signed for the test (trustme, on the cryptography library)."""

from __future__ import annotations

import sys

import pytest
from rocketmq_sdk import Message, Producer
from rocketmq_sdk.exceptions import RemotingError

from .conftest import finish, server_process, unique  # noqa: F401 - server_process is a fixture
from .test_official_client import consume

trustme = pytest.importorskip("trustme")


@pytest.fixture
def tls_files(tmp_path):
    """(cert path, key path, CA path) of a certificate for 127.0.0.1 and localhost."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    paths = tmp_path / "proxy.crt", tmp_path / "proxy.key", tmp_path / "ca.pem"
    paths[0].write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    paths[1].write_bytes(cert.private_key_pem.bytes())
    ca.cert_pem.write_to_path(str(paths[2]))
    return tuple(str(p) for p in paths)


@pytest.mark.parametrize("mode", ["local", "cluster"])
def test_dev_serves_grpc_over_tls(server_process, tls_files, tmp_path, mode, official, monkeypatch):  # noqa: F811
    cert, key, ca = tls_files
    dev = server_process([sys.executable, "-m", "rocketmq_broker", "dev", "--store", str(tmp_path / "st"),
                          "--namesrv-port", "0", "--broker-port", "0", "--grpc-port", "0", "--grpc-mode", mode,
                          "--grpc-tls-cert", cert, "--grpc-tls-key", key])
    addr, topic = dev.lines["GRPC"], unique("tls")
    with open(ca, "rb") as f:
        roots = f.read()
    with Producer(unique("pg"), endpoints=addr, protocol="grpc", use_tls=True, tls_root_certificates=roots) as p:
        ours = p.send(Message(topic, b"sdk over tls")).msg_id
    with Producer(unique("pg"), endpoints=addr, protocol="grpc", send_msg_timeout=1500,
                  retry_times_when_send_failed=0) as plain:
        with pytest.raises(RemotingError):
            plain.send(Message(topic, b"plaintext"))
    monkeypatch.setenv("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", ca)  # read by the official client's grpc
    theirs = finish(official("tls_send.py", addr, topic))[0]["id"]
    got = {m.msg_id: m.body for m in consume(dev.lines["NAMESRV"], topic, 2)}
    assert got == {ours: b"sdk over tls", theirs: b"over tls"}
    assert dev.stop() == 0


def test_tls_options_go_together(server_process, tls_files, tmp_path):  # noqa: F811
    import subprocess

    cert, _, _ = tls_files
    out = subprocess.run([sys.executable, "-m", "rocketmq_broker", "dev", "--store", str(tmp_path / "st"),
                          "--namesrv-port", "0", "--broker-port", "0", "--grpc-port", "0", "--grpc-tls-cert", cert],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--grpc-tls-cert and --grpc-tls-key go together" in out.stderr
