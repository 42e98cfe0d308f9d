"""The proxy CA: file modes, name constraints, and what a trusting client accepts."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from airlock.proxy import ca as ca_mod
from tests.fakes.proxy_harness import running_proxy

INTERCEPT = {"github.com", "api.github.com", "vercel.com", "api.vercel.com"}


def _leaf(ca: ca_mod.ProxyCA, directory: Path, name: str) -> tuple[Path, Path]:
    """A leaf for ``name`` signed with the proxy CA's key (as a thief could)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    san: x509.GeneralName
    try:
        import ipaddress

        san = x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        san = x509.DNSName(name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([san]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    cert_path = directory / f"{name}.pem"
    key_path = directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def _handshake(ca_path: Path, cert: Path, key: Path, server_hostname: str) -> None:
    """Serve ``cert`` on loopback and connect with a client that trusts ``ca_path``."""
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        client_ctx = ssl.create_default_context(cafile=str(ca_path))
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            client_ctx.wrap_socket(raw, server_hostname=server_hostname) as tls,
        ):
            tls.sendall(b"x")
    finally:
        listener.close()
        thread.join(5)


def test_ca_files_modes_and_constraints(tmp_path: Path) -> None:
    ca = ca_mod.load_or_create(tmp_path, INTERCEPT)
    assert stat.S_IMODE(ca.key_path.stat().st_mode) == 0o600
    assert ca.permitted() == INTERCEPT
    nc = ca.cert.extensions.get_extension_for_class(x509.NameConstraints)
    assert nc.critical
    excluded = {str(n.value) for n in nc.value.excluded_subtrees or []}
    assert excluded == {"0.0.0.0/0", "::/0"}
    bc = ca.cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert bc.ca and bc.path_length == 0
    # mitmproxy's combined file holds the key: 0600 too.
    combined = ca.install(tmp_path / "mitm")
    assert stat.S_IMODE(combined.stat().st_mode) == 0o600


def test_ca_is_reused_and_recreated_when_intercept_set_changes(tmp_path: Path) -> None:
    first = ca_mod.load_or_create(tmp_path, INTERCEPT)
    again = ca_mod.load_or_create(tmp_path, INTERCEPT)
    assert again.cert.serial_number == first.cert.serial_number
    changed = ca_mod.load_or_create(tmp_path, {"github.com"})
    assert changed.cert.serial_number != first.cert.serial_number
    assert changed.permitted() == {"github.com"}


def test_client_trusting_the_ca_rejects_certificates_outside_the_constraints(
    tmp_path: Path,
) -> None:
    ca = ca_mod.load_or_create(tmp_path, INTERCEPT)
    # Positive control: an in-constraint name verifies.
    cert, key = _leaf(ca, tmp_path, "api.github.com")
    _handshake(ca.cert_path, cert, key, "api.github.com")
    # A certificate the same CA signs for any other site does not.
    for name in ("evil.example", "github.com.evil.example", "127.0.0.1"):
        cert, key = _leaf(ca, tmp_path, name)
        with pytest.raises(ssl.SSLCertVerificationError) as info:
            _handshake(ca.cert_path, cert, key, name)
        assert "subtree" in str(info.value) or "name constraint" in str(info.value).lower()


async def test_ca_pem_is_served_and_matches_the_state_dir(tmp_path: Path) -> None:
    async with running_proxy(tmp_path) as proxy, proxy.client() as client:
        pem = await client.ca_pem()
    assert pem.encode() == proxy.ca_path.read_bytes()
    assert "PRIVATE KEY" not in pem
    cert = x509.load_pem_x509_certificate(pem.encode())
    nc = cert.extensions.get_extension_for_class(x509.NameConstraints).value
    assert {str(n.value) for n in nc.permitted_subtrees or []} == INTERCEPT
    assert stat.S_IMODE((proxy.state_dir / "ca.key").stat().st_mode) == 0o600


def test_operator_provided_ca_is_never_replaced_silently(tmp_path: Path) -> None:
    shared = ca_mod.load_or_create(tmp_path / "made", INTERCEPT)
    state = tmp_path / "replica"
    state.mkdir()
    # What an operator copies into each replica: the cert and key, no marker.
    (state / "ca.pem").write_bytes(shared.cert_path.read_bytes())
    (state / "ca.key").write_bytes(shared.key_path.read_bytes())
    loaded = ca_mod.load_or_create(state, INTERCEPT)
    assert loaded.cert.serial_number == shared.cert.serial_number
    with pytest.raises(ca_mod.CAError) as info:
        ca_mod.load_or_create(state, {"github.com"})
    assert "not created by airlock-proxy" in str(info.value)
    assert (state / "ca.pem").read_bytes() == shared.cert_path.read_bytes()


def test_ca_without_name_constraints_is_refused(tmp_path: Path) -> None:
    from tests.fakes.tls import TestCA

    plain = TestCA(tmp_path / "plain")
    state = tmp_path / "state"
    state.mkdir()
    (state / "ca.pem").write_bytes(plain.ca_path.read_bytes())
    (state / "ca.key").write_bytes(
        plain._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(ca_mod.CAError) as info:
        ca_mod.load_or_create(state, INTERCEPT)
    assert "no name constraints" in str(info.value)
