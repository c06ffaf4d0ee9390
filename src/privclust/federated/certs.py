"""A small PKI for federated runs: a CA, a server certificate, one certificate per party.

Every party authenticates with mutual TLS; the server admits party i only with a
certificate for common name ``party-i`` signed by the run's CA.  ``make_certs``
writes such a set (for tests and for operators without their own PKI).
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["make_certs", "server_context", "client_context"]


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write(folder: Path, stem: str, key, cert) -> None:
    (folder / f"{stem}.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    (folder / f"{stem}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / f"{stem}.key").chmod(0o600)


def make_certs(folder: str | Path, parties: int, hosts=("localhost", "127.0.0.1"), days: int = 30) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("privclust federated CA"))
        .issuer_name(_name("privclust federated CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    _write(folder, "ca", ca_key, ca)

    def issue(common: str, san: list) -> tuple:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    san = []
    for host in hosts:
        try:
            san.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            san.append(x509.DNSName(host))
    _write(folder, "server", *issue("privclust server", san))
    for i in range(parties):
        _write(folder, f"party-{i}", *issue(f"party-{i}", []))
    return folder


def _context(protocol: int, cert, key, ca) -> ssl.SSLContext:
    context = ssl.SSLContext(protocol)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    context.load_verify_locations(ca)
    return context


def server_context(cert: str | Path, key: str | Path, ca: str | Path) -> ssl.SSLContext:
    context = _context(ssl.PROTOCOL_TLS_SERVER, cert, key, ca)
    context.verify_mode = ssl.CERT_REQUIRED  # mutual TLS: only parties with a CA-signed certificate
    return context


def client_context(cert: str | Path, key: str | Path, ca: str | Path) -> ssl.SSLContext:
    return _context(ssl.PROTOCOL_TLS_CLIENT, cert, key, ca)
