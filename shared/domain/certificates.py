"""What a ClientCertificate job shows of its pfx: thumbprint, subject, expiry; never the pfx.

The subject is written as the real service wrote it: .NET's `X509Certificate2.Subject`, which is
Windows' X.500 string of the name (CertNameToStr with CERT_X500_NAME_STR, last relative name
first). A certificate issued to `C=US, ST=Some-State, O=Terraform Tests, OU=Azure, CN=Terraform
App Gateway` read back as `CN=Terraform App Gateway, OU=Azure, O=Terraform Tests, S=Some-State,
C=US` in Terraform's acceptance test of the scheduler job, run against the live service.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shared.domain.wire import iso

if TYPE_CHECKING:
    from cryptography import x509

# Windows' X.500 key names for attribute types; any other type is written `OID.<dotted>`.
_X500_KEYS = {
    "2.5.4.3": "CN",
    "2.5.4.4": "SN",
    "2.5.4.5": "SERIALNUMBER",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "S",
    "2.5.4.9": "STREET",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.12": "T",
    "2.5.4.13": "Description",
    "2.5.4.17": "PostalCode",
    "2.5.4.18": "POBox",
    "2.5.4.20": "Phone",
    "2.5.4.24": "X21Address",
    "2.5.4.42": "G",
    "2.5.4.43": "I",
    "2.5.4.46": "dnQualifier",
    "1.2.840.113549.1.9.1": "E",
    "1.2.840.113549.1.9.2": "UnstructuredName",
    "1.2.840.113549.1.9.8": "UnstructuredAddress",
    "0.9.2342.19200300.100.1.25": "DC",
}
# A value holding one of these, or space at either end, or nothing, is written in quotes.
_QUOTED_IF_IN = frozenset(',+="\n<>#;')


class UnreadableCertificate(ValueError):
    pass


@dataclass(frozen=True)
class CertificateFacts:
    thumbprint: str
    subject: str
    expires: str  # ISO 8601, UTC


def read_pfx(pfx_base64: str, password: str | None) -> CertificateFacts:
    """The facts of the certificate in a base64 PKCS#12 file, or UnreadableCertificate."""
    try:
        data = base64.b64decode(pfx_base64, validate=True)
    except (binascii.Error, ValueError):
        raise UnreadableCertificate("is not base64") from None
    # Imported here: cryptography is a tenth of a second of a cold start's import, and only jobs
    # that authenticate with a client certificate need it.
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415
    from cryptography.hazmat.primitives.serialization import pkcs12  # noqa: PLC0415

    try:
        _, certificate, _ = pkcs12.load_key_and_certificates(
            data, password.encode() if password else None
        )
    except (ValueError, TypeError):
        raise UnreadableCertificate(
            "does not open as a PKCS#12 (pfx) file with the password given"
        ) from None
    if certificate is None:
        raise UnreadableCertificate("holds no certificate")
    return CertificateFacts(
        thumbprint=certificate.fingerprint(hashes.SHA1())
        .hex()
        .upper(),  # a thumbprint is SHA-1 by definition
        subject=x500_text(certificate.subject),
        expires=iso(certificate.not_valid_after_utc),
    )


def x500_text(name: x509.Name) -> str:
    """`name` as Windows writes it: relative names last first, joined by ", "; the attributes of
    one joined by " + "; each `KEY=value`, the value in double quotes (inner ones doubled) where
    Windows quotes one."""
    return ", ".join(
        " + ".join(
            f"{_X500_KEYS.get(attribute.oid.dotted_string, 'OID.' + attribute.oid.dotted_string)}"
            f"={_x500_value(attribute.value)}"
            for attribute in relative
        )
        for relative in reversed(name.rdns)
    )


def _x500_value(value: str | bytes) -> str:
    if isinstance(value, bytes):  # a bit string: Windows writes it in hexadecimal (our "#")
        return "#" + value.hex().upper()
    if value == "" or value != value.strip() or not _QUOTED_IF_IN.isdisjoint(value):
        return '"' + value.replace('"', '""') + '"'
    return value
