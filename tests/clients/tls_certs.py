"""Certificates for the TLS and SASL tests: a CA, a server certificate
for 127.0.0.1 and localhost, a client certificate, and a second CA with a
client and a server certificate of its own."""

import datetime
import ipaddress
import os
import shutil
import tempfile

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(path, cert, key):
    with open(path + ".pem", "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(path + ".key", "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))


def _issue(dir, name, issuer=None, server=False):
    """A CA (no issuer) or a certificate `issuer` = (cert, key) signs."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder()
         .subject_name(_name(name))
         .issuer_name(issuer[0].subject if issuer else _name(name))
         .public_key(key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=1)))
    if issuer is None:
        b = b.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        b = b.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
    else:
        b = b.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        usage = x509.oid.ExtendedKeyUsageOID.SERVER_AUTH if server else x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH
        b = b.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        if server:
            b = b.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    cert = b.sign(issuer[1] if issuer else key, hashes.SHA256())
    _write(os.path.join(dir, name), cert, key)
    return cert, key


@pytest.fixture(scope="session")
def certs():
    """A folder of NAME.pem and NAME.key files: ca, server, client, ops (a
    second client of ca), other-ca,
    stranger (a client of other-ca) and server-next (a server of other-ca)."""
    d = tempfile.mkdtemp(prefix="aerostream-tls-")
    ca = _issue(d, "ca")
    _issue(d, "server", ca, server=True)
    _issue(d, "client", ca)
    _issue(d, "ops", ca)
    other = _issue(d, "other-ca")
    _issue(d, "stranger", other)
    # a second server certificate, from the other CA, for the reload test
    _issue(d, "server-next", other, server=True)
    yield d
    shutil.rmtree(d, ignore_errors=True)
