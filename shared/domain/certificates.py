"""What a ClientCertificate job shows of its pfx: thumbprint, subject, expiry; never the pfx."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from shared.domain.wire import iso


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
        subject=certificate.subject.rfc4514_string(),
        expires=iso(certificate.not_valid_after_utc),
    )
