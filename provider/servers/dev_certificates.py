"""Certificates for development and tests: a throw-away CA and a server certificate for loopback.

Made with the ``cryptography`` package (an Airflow dependency), as PEM files that both sides read
directly: ZooKeeper's ``ssl.keyStore.type=PEM`` key store (private key and certificate in one file)
and trust store, and kazoo's ``ca``/``certfile``/``keyfile``. Not for production: the keys are
unencrypted and the CA lives next to them.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_epochs.private_files import private_dir, write_private

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class DevCertificates:
    """Paths of the generated PEM files.

    :param ca: the CA certificate (a client's ``ca``, the server's trust store).
    :param server_keystore: the server's key and certificate in one file (ZooKeeper's PEM key store).
    :param client_cert: a client certificate signed by the CA (for ``ssl.clientAuth=need``).
    :param client_key: its key.
    """

    ca: Path
    server_keystore: Path
    client_cert: Path
    client_key: Path


def generate_dev_certificates(directory: str | Path, *, names: Sequence[str] = LOOPBACK_NAMES,
                              ca_name: str = "airflow-epochs dev CA", days: int = 7) -> DevCertificates:
    """Write a CA, a server certificate for ``names`` (DNS names and IP addresses) and a client
    certificate into ``directory`` (0700, keys 0600).

    :param names: what the server certificate is valid for; a client checking host names must connect
        to one of them.
    """
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError as exc:  # pragma: no cover - cryptography comes with Airflow
        raise RuntimeError("generating certificates needs the 'cryptography' package") from exc

    folder = private_dir(directory)
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)

    def name(common: str) -> Any:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def key_pem(key: Any) -> str:
        return str(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption()).decode())

    def cert_pem(cert: Any) -> str:
        return str(cert.public_bytes(serialization.Encoding.PEM).decode())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (x509.CertificateBuilder().subject_name(name(ca_name)).issuer_name(name(ca_name))
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, encipher_only=False,
                                            decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))

    def leaf(common: str, sans: list[Any], usage: Any) -> tuple[Any, Any]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(name(common)).issuer_name(ca_cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(start).not_valid_after(end)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usage), critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    sans: list[Any] = []
    for entry in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(entry)))
        except ValueError:
            sans.append(x509.DNSName(entry))
    # The server's certificate also authenticates it as a client: ensemble members connect to each other
    # over mutual TLS (ZooKeeper's sslQuorum) with it.
    server_key, server_cert = leaf(names[0] if names else "server", sans,
                                   [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH])
    client_key, client_cert = leaf("airflow-epochs client", [], [ExtendedKeyUsageOID.CLIENT_AUTH])

    files = DevCertificates(ca=folder / "ca.pem", server_keystore=folder / "server.pem",
                            client_cert=folder / "client-cert.pem", client_key=folder / "client-key.pem")
    write_private(files.ca, cert_pem(ca_cert))
    write_private(files.server_keystore, key_pem(server_key) + cert_pem(server_cert) + cert_pem(ca_cert))
    write_private(files.client_cert, cert_pem(client_cert))
    write_private(files.client_key, key_pem(client_key))
    return files
