"""Small builders that keep the tests reading like the spec."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from shared.domain.schedule.occurrences import Occurrences
from shared.domain.schedule.recurrence import Recurrence


def utc(text: str) -> datetime:
    """`"2026-06-01T09:00"` as an aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def occurrences(
    recurrence: dict[str, Any] | None,
    *,
    start: str | None,
    created: str,
) -> Occurrences:
    """The occurrences of a job defined at `created` (UTC) with a startTime and recurrence JSON."""
    return Occurrences(
        start_time=utc(start) if start else None,
        recurrence=Recurrence.model_validate(recurrence) if recurrence is not None else None,
        created_at=utc(created),
    )


def iso(instants: list[datetime]) -> list[str]:
    """Instants as minute-precision UTC strings, the way the expectations are written."""
    return [instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M" + (":%S" if instant.second else ""))
            for instant in instants]


def made_pfx(
    password: str, *, subject: str = "scheduler-client", expires: datetime | None = None
) -> tuple[str, str]:
    """A self-signed certificate in a pfx (base64), and its thumbprint."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    expires = expires or datetime.now(UTC) + timedelta(days=30)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(expires - timedelta(days=60))
        .not_valid_after(expires).sign(key, hashes.SHA256())
    )  # fmt: skip
    pfx = pkcs12.serialize_key_and_certificates(
        b"client", key, certificate, None, serialization.BestAvailableEncryption(password.encode())
    )
    return base64.b64encode(pfx).decode(), certificate.fingerprint(hashes.SHA1()).hex().upper()
