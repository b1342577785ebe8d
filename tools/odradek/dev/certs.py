"""Throwaway certificate authorities and certificates (the ``cryptography`` package): the one
place the secured dev cluster (``odradek dev up --security sasl_ssl``) and the tests make them.

``CertificateAuthority.create()`` is a self-signed CA; ``issue(*names, ...)`` returns one
PEM holding a new certificate, the CA's certificate (the chain) and the unencrypted private key
(the form ``ssl.keystore.location`` and the clients take). Names become subjectAltNames: an IP
address, an e-mail address (with ``@``) or a DNS name. The subject is ``O``, ``OU``, ``CN`` in
that order, so Kafka's DEFAULT principal (most specific first) reads ``CN=..,OU=..,O=..``.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=3650)
_PEM = serialization.Encoding.PEM


def _subject(common_name: str, organization: str | None, unit: str | None) -> x509.Name:
    parts = [(NameOID.ORGANIZATION_NAME, organization), (NameOID.ORGANIZATIONAL_UNIT_NAME, unit),
             (NameOID.COMMON_NAME, common_name)]
    return x509.Name([x509.NameAttribute(oid, value) for oid, value in parts if value])


def _alt_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.RFC822Name(name) if "@" in name else x509.DNSName(name)


def _builder(subject: x509.Name, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + VALIDITY))


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


@dataclass
class CertificateAuthority:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def create(cls, common_name: str = "Odradek dev CA") -> "CertificateAuthority":
        key = ec.generate_private_key(ec.SECP256R1())
        name = _subject(common_name, "Odradek", None)
        cert = (_builder(name, name, key.public_key())
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False,
                                             encipher_only=False, decipher_only=False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .sign(key, hashes.SHA256()))
        return cls(key, cert)

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(_PEM)

    def issue(self, *names: str, common_name: str | None = None, organization: str | None = None,
              unit: str | None = None) -> bytes:
        """A certificate for ``names`` (server and client use), as chain-and-key PEM."""
        if not names and not common_name:
            raise ValueError("a certificate needs a name or a common name")
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (_builder(_subject(common_name or names[0], organization, unit), self.cert.subject,
                            key.public_key())
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                         ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                                  critical=False))
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName([_alt_name(n) for n in names]),
                                            critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return cert.public_bytes(_PEM) + self.cert_pem + _key_pem(key)

    def write_ca(self, path: Path) -> Path:
        path.write_bytes(self.cert_pem)
        return path

    def write_issued(self, path: Path, *names: str, **subject: str) -> Path:
        """``issue`` into ``path``, readable by its owner only (it holds a private key)."""
        path.touch(mode=0o600, exist_ok=True)
        path.write_bytes(self.issue(*names, **subject))
        return path
