"""Throw-away TLS certificates for the security tests, generated into a pytest tmp dir.

Never committed: every test run makes a fresh CA, a server certificate for ``localhost`` /
``127.0.0.1`` signed by it, and client certificates signed by a given CA (``cryptography``
package, test extra). Keys are EC P-256: fast to generate, accepted by gRPC's BoringSSL.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pair:
    """A certificate and its key as PEM files."""

    cert: Path
    key: Path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(directory: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Pair:
    directory.mkdir(parents=True, exist_ok=True)
    c, k = directory / f"{stem}.crt", directory / f"{stem}.key"
    c.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    k.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))
    k.chmod(0o600)
    return Pair(c, k)


def _builder(subject: str, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer)
            .public_key(public_key).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1)))


@dataclass(frozen=True)
class CA:
    """A self-signed certificate authority that can issue server and client certificates."""

    pair: Pair
    name: x509.Name
    key: ec.EllipticCurvePrivateKey
    directory: Path

    @staticmethod
    def create(directory: Path, cn: str = "hotjoin test CA") -> CA:
        key = ec.generate_private_key(ec.SECP256R1())
        name = _name(cn)
        cert = (_builder(cn, name, key.public_key())
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False,
                                             encipher_only=False, decipher_only=False), critical=True)
                .sign(key, hashes.SHA256()))
        stem = cn.replace(" ", "-")
        return CA(_write(directory, stem, cert, key), name, key, directory)

    def issue(self, cn: str, server: bool) -> Pair:
        """A leaf certificate for ``cn``; server certificates name localhost and 127.0.0.1."""
        key = ec.generate_private_key(ec.SECP256R1())
        b = _builder(cn, self.name, key.public_key()).add_extension(
            x509.BasicConstraints(ca=False, path_length=None), critical=True)
        if server:
            b = b.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.DNSName(cn),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        else:
            b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        return _write(self.directory, cn.replace(" ", "-"), b.sign(self.key, hashes.SHA256()), key)
