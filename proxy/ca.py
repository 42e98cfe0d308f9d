"""The proxy's name-constrained certificate authority.

Created with ``cryptography`` at first start in the state dir (``ca.key`` mode
0600, ``ca.pem`` public). X.509 name constraints (critical) permit only the
intercept set as DNS names and exclude every IP address, so a leaked CA key
cannot impersonate any other site to a client that trusts it. (DNS constraints
cover a name and its subdomains; that is the finest grain X.509 offers.)

If the intercept set changes, a CA this proxy generated (``ca.generated``
marker) is re-created: a CA whose constraints do not match the running
configuration would either fail interception or permit more than it should.
Orchestrators re-fetch ``GET /v1/ca.pem``. A CA the operator provided (no
marker: e.g. one CA shared by several replicas) is never replaced silently;
a mismatch is a start-up error, since replicas with different CAs would break
every sandbox that trusts the shared one.

mitmproxy reads ``<confdir>/mitmproxy-ca.pem`` (key + cert); :func:`install`
writes it (0600) from the canonical files.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

log = logging.getLogger("airlock.proxy.ca")

CA_CERT = "ca.pem"
CA_KEY = "ca.key"
CA_MARKER = "ca.generated"
#: What a CA key is for: signing certificates and CRLs (critical on every CA we make).
CA_KEY_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)
MITM_BASENAME = "mitmproxy"


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(
        path.with_suffix(path.suffix + ".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600
    )
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path.with_suffix(path.suffix + ".tmp"), 0o600)
    os.replace(path.with_suffix(path.suffix + ".tmp"), path)


def _constraints(intercept: Iterable[str]) -> x509.NameConstraints:
    return x509.NameConstraints(
        permitted_subtrees=[x509.DNSName(h) for h in sorted(intercept)],
        excluded_subtrees=[
            x509.IPAddress(ipaddress.ip_network("0.0.0.0/0")),
            x509.IPAddress(ipaddress.ip_network("::/0")),
        ],
    )


class CAError(Exception):
    """The CA in the state dir cannot be used and must not be replaced."""


CAKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class ProxyCA:
    cert: x509.Certificate
    key: CAKey
    cert_path: Path
    key_path: Path

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def permitted(self) -> set[str]:
        nc = self.cert.extensions.get_extension_for_class(x509.NameConstraints).value
        return {str(n.value) for n in nc.permitted_subtrees or []}

    def install(self, confdir: Path) -> Path:
        """Write mitmproxy's combined key+cert file; returns its path."""
        confdir.mkdir(parents=True, exist_ok=True)
        key_pem = self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        target = confdir / f"{MITM_BASENAME}-ca.pem"
        _write_private(target, key_pem + self.cert_pem)
        return target


def create(state_dir: Path, intercept: Iterable[str]) -> ProxyCA:
    hosts = sorted(set(intercept))
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "airlock"),
            x509.NameAttribute(NameOID.COMMON_NAME, "airlock-proxy CA"),
        ]
    )
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=3))
        .not_valid_after(now + dt.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(CA_KEY_USAGE, critical=True)
        .add_extension(_constraints(hosts), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    state_dir.mkdir(parents=True, exist_ok=True)
    key_path = state_dir / CA_KEY
    cert_path = state_dir / CA_CERT
    _write_private(
        key_path,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (state_dir / CA_MARKER).write_text(
        "created by airlock-proxy; it re-creates this CA when --intercept changes\n"
    )
    return ProxyCA(cert=cert, key=key, cert_path=cert_path, key_path=key_path)


def load_or_create(state_dir: Path, intercept: Iterable[str]) -> ProxyCA:
    """Load the CA from ``state_dir``; create it when absent (or ours and stale)."""
    hosts = set(intercept)
    key_path = state_dir / CA_KEY
    cert_path = state_dir / CA_CERT
    if not (key_path.exists() or cert_path.exists()):
        return create(state_dir, hosts)
    ours = (state_dir / CA_MARKER).exists()
    problem = _check(key_path, cert_path, hosts)
    if isinstance(problem, ProxyCA):
        os.chmod(key_path, 0o600)
        return problem
    if ours:
        log.warning("%s; creating a new CA (re-fetch /v1/ca.pem)", problem)
        return create(state_dir, hosts)
    raise CAError(
        f"the CA in {state_dir} cannot be used: {problem}. It was not created by "
        "airlock-proxy, so it is not replaced; provide a CA name-constrained to the "
        "intercept set, or remove ca.pem and ca.key to let the proxy create one."
    )


def _check(key_path: Path, cert_path: Path, hosts: set[str]) -> ProxyCA | str:
    try:
        key = serialization.load_pem_private_key(key_path.read_bytes(), None)
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    except (OSError, ValueError, TypeError):
        return "ca.pem/ca.key are missing or unreadable"
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        return "the CA key is neither EC nor RSA"
    if key.public_key().public_numbers() != cert.public_key().public_numbers():  # type: ignore[union-attr]
        return "ca.key does not match ca.pem"
    ca = ProxyCA(cert=cert, key=key, cert_path=cert_path, key_path=key_path)
    try:
        permitted = ca.permitted()
    except x509.ExtensionNotFound:
        return "the CA has no name constraints"
    if permitted != hosts:
        return f"the CA permits {sorted(permitted)}, the intercept set is {sorted(hosts)}"
    if cert.not_valid_after_utc < dt.datetime.now(dt.UTC) + dt.timedelta(days=30):
        return "the CA expires within 30 days"
    return ca
