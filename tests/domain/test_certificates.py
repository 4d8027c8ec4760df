"""A client certificate's subject, written as the real service wrote it (Windows' X.500 string)."""

from __future__ import annotations

import base64
from datetime import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from shared.domain.certificates import read_pfx, x500_text
from tests.factories import made_pfx


def named(*relative_names: list[tuple[x509.ObjectIdentifier, str]]) -> x509.Name:
    """A name of these relative names, in this (DER) order."""
    return x509.Name([
        x509.RelativeDistinguishedName([x509.NameAttribute(oid, value) for oid, value in relative])
        for relative in relative_names
    ])  # fmt: skip


# The certificate of Terraform's acceptance test for the scheduler job (its subject, as OpenSSL
# writes a request's fields: country first), and what the live service answered for it.
TERRAFORM_SUBJECT = named(
    [(NameOID.COUNTRY_NAME, "US")], [(NameOID.STATE_OR_PROVINCE_NAME, "Some-State")],
    [(NameOID.ORGANIZATION_NAME, "Terraform Tests")], [(NameOID.ORGANIZATIONAL_UNIT_NAME, "Azure")],
    [(NameOID.COMMON_NAME, "Terraform App Gateway")],
)  # fmt: skip
ANSWERED = "CN=Terraform App Gateway, OU=Azure, O=Terraform Tests, S=Some-State, C=US"


def test_the_subject_the_live_service_answered_for_terraforms_certificate() -> None:
    assert x500_text(TERRAFORM_SUBJECT) == ANSWERED


def test_a_pfx_shows_its_subject_in_that_form() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = (
        x509.CertificateBuilder().subject_name(TERRAFORM_SUBJECT).issuer_name(TERRAFORM_SUBJECT)
        .public_key(key.public_key()).serial_number(1)
        .not_valid_before(datetime(2017, 1, 1))
        .not_valid_after(datetime(2030, 1, 1)).sign(key, hashes.SHA256())
    )  # fmt: skip
    pfx = pkcs12.serialize_key_and_certificates(
        b"gateway", key, certificate, None, serialization.BestAvailableEncryption(b"terraform")
    )
    facts = read_pfx(base64.b64encode(pfx).decode(), "terraform")
    assert facts.subject == ANSWERED
    assert facts.expires == "2030-01-01T00:00:00Z"


def test_a_single_common_name_reads_as_the_recorded_one_did() -> None:
    pfx, _ = made_pfx("pw", subject="May14SchedulerMgmt")
    assert read_pfx(pfx, "pw").subject == "CN=May14SchedulerMgmt"


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("Contoso, Ltd", '"Contoso, Ltd"'),
        ('The "Best" Co', '"The ""Best"" Co"'),
        (" padded", '" padded"'),
        ("a+b", '"a+b"'),
        ("x=y", '"x=y"'),
        ("#1", '"#1"'),
        ("semi;colon", '"semi;colon"'),
        ("<angle>", '"<angle>"'),
        ("two\nlines", '"two\nlines"'),
        ("", '""'),
        ("plain words and numbers 42", "plain words and numbers 42"),
        ("back\\slash", "back\\slash"),
    ],
)
def test_values_are_quoted_where_windows_quotes_them(value: str, written: str) -> None:
    assert x500_text(named([(NameOID.ORGANIZATION_NAME, value)])) == f"O={written}"


def test_key_names_are_windows_own_and_an_unknown_type_is_named_by_its_oid() -> None:
    name = named(
        [(NameOID.DOMAIN_COMPONENT, "org")], [(NameOID.EMAIL_ADDRESS, "ops@example.org")],
        [(NameOID.GIVEN_NAME, "Ada"), (NameOID.SURNAME, "Lovelace")],
        [(x509.ObjectIdentifier("1.2.3.4"), "custom")], [(NameOID.TITLE, "Engineer")],
    )  # fmt: skip
    assert x500_text(name) == (
        "T=Engineer, OID.1.2.3.4=custom, G=Ada + SN=Lovelace, E=ops@example.org, DC=org"
    )
