"""Certificate authorities and certificates (the ``cryptography`` package): the one place
Odradek makes them — the operator's cluster and clients CAs (``odradek.operator.certs``), the
secured dev cluster (``odradek dev up --security sasl_ssl``) and the tests.

``CertificateAuthority.create()`` is a self-signed CA; ``from_pem`` loads one (a user-supplied
CA, or one kept in a Secret) and checks that the key belongs to the certificate; ``renewed``
re-signs the CA certificate with the same key (certificates it issued stay valid against
either, which is what lets a renewal roll pods one at a time). ``issue_certificate(*names, ...)``
returns the certificate and its key as separate PEMs (``IssuedCertificate``); ``issue`` one PEM
holding the certificate, the CA's certificate (the chain) and the unencrypted private key (the
form ``ssl.keystore.location`` and the clients take). Names become subjectAltNames: an IP
address, an e-mail address (with ``@``) or a DNS name (``*.x`` wildcards allowed). The subject
is ``O``, ``OU``, ``CN`` in that order, so Kafka's DEFAULT principal (most specific first)
reads ``CN=..,OU=..,O=..``. ``not_after`` and ``alt_names`` read a PEM certificate back.
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
# A certificate starts a little in the past: clocks of the pods that check it may lag.
_BACKDATE = datetime.timedelta(hours=1)


def _subject(common_name: str, organization: str | None, unit: str | None) -> x509.Name:
    parts = [(NameOID.ORGANIZATION_NAME, organization), (NameOID.ORGANIZATIONAL_UNIT_NAME, unit),
             (NameOID.COMMON_NAME, common_name)]
    return x509.Name([x509.NameAttribute(oid, value) for oid, value in parts if value])


def _alt_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.RFC822Name(name) if "@" in name else x509.DNSName(name)


def _builder(subject: x509.Name, issuer: x509.Name, public_key, validity: datetime.timedelta,
             latest: datetime.datetime | None = None) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    end = now + validity if latest is None else min(now + validity, latest)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE).not_valid_after(end))


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def not_after(cert_pem: bytes) -> datetime.datetime:
    """When the (first) certificate of ``cert_pem`` expires (UTC, aware)."""
    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc


def alt_names(cert_pem: bytes) -> list[str]:
    """The subjectAltNames of the (first) certificate of ``cert_pem``, as ``issue`` takes them."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(n.value) for n in ext]


@dataclass(frozen=True)
class IssuedCertificate:
    """A certificate (``cert_pem``, the certificate alone), its private key and its CA."""
    cert_pem: bytes
    key_pem: bytes
    ca_pem: bytes

    def chain_and_key(self) -> bytes:
        """One PEM: the certificate, the CA's certificate and the key (``ssl.keystore.location``)."""
        return self.cert_pem + self.ca_pem + self.key_pem


@dataclass
class CertificateAuthority:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def create(cls, common_name: str = "Odradek dev CA", organization: str = "Odradek",
               validity: datetime.timedelta = VALIDITY) -> "CertificateAuthority":
        key = ec.generate_private_key(ec.SECP256R1())
        return cls(key, cls._self_signed(key, _subject(common_name, organization, None), validity))

    @staticmethod
    def _self_signed(key: ec.EllipticCurvePrivateKey, name: x509.Name,
                     validity: datetime.timedelta) -> x509.Certificate:
        return (_builder(name, name, key.public_key(), validity)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False,
                                             encipher_only=False, decipher_only=False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .sign(key, hashes.SHA256()))

    @classmethod
    def from_pem(cls, cert_pem: bytes, key_pem: bytes) -> "CertificateAuthority":
        """A CA from its certificate and unencrypted private key; ``ValueError`` when either
        does not parse, the certificate is not a CA's, or the key is not the certificate's."""
        try:
            cert = x509.load_pem_x509_certificate(cert_pem)
            key = serialization.load_pem_private_key(key_pem, password=None)
        except (ValueError, TypeError) as e:
            raise ValueError(f"not a PEM certificate and unencrypted PEM private key: {e}") from None
        try:
            is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        except x509.ExtensionNotFound:
            is_ca = False
        if not is_ca:
            raise ValueError("the certificate is not a CA certificate (basicConstraints CA:TRUE)")
        if key.public_key().public_numbers() != cert.public_key().public_numbers():
            raise ValueError("the private key does not belong to the CA certificate")
        return cls(key, cert)

    def renewed(self, validity: datetime.timedelta) -> "CertificateAuthority":
        """The same CA (subject, key) with a new certificate valid for ``validity`` from now."""
        return CertificateAuthority(self.key, self._self_signed(self.key, self.cert.subject, validity))

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(_PEM)

    @property
    def key_pem(self) -> bytes:
        return _key_pem(self.key)

    def issue_certificate(self, *names: str, common_name: str | None = None, organization: str | None = None,
                          unit: str | None = None, validity: datetime.timedelta = VALIDITY) -> IssuedCertificate:
        """A certificate for ``names`` (server and client use) and its new key. It never
        outlives the CA's certificate."""
        if not names and not common_name:
            raise ValueError("a certificate needs a name or a common name")
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (_builder(_subject(common_name or names[0], organization, unit), self.cert.subject,
                            key.public_key(), validity, self.cert.not_valid_after_utc)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                         ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                                  critical=False))
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName([_alt_name(n) for n in names]),
                                            critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return IssuedCertificate(cert.public_bytes(_PEM), _key_pem(key), self.cert_pem)

    def issue(self, *names: str, common_name: str | None = None, organization: str | None = None,
              unit: str | None = None) -> bytes:
        """A certificate for ``names`` (server and client use), as chain-and-key PEM."""
        return self.issue_certificate(*names, common_name=common_name, organization=organization,
                                      unit=unit).chain_and_key()

    def write_ca(self, path: Path) -> Path:
        path.write_bytes(self.cert_pem)
        return path

    def write_issued(self, path: Path, *names: str, **subject: str) -> Path:
        """``issue`` into ``path``, readable by its owner only (it holds a private key)."""
        path.touch(mode=0o600, exist_ok=True)
        path.write_bytes(self.issue(*names, **subject))
        return path
