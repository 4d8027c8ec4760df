"""The local host's part of the platform's sign-in: which tokens it accepts, and what it passes on.

Each refused token is a kind an attacker or a misconfigured client sends: expired, not yet
valid, for another audience, from another issuer, signed with another key, unsigned
(`alg: none`), or signed with HS256 using the public key as the secret (the algorithm
confusion attack).
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from devhost import identity
from devhost.identity import AUDIENCE, ISSUER, LocalSignIn, mint, object_id_of, principal_headers

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture(autouse=True)
def now_is_when_the_test_runs() -> None:
    """Tokens are minted around the moment each test runs, not when the module was collected:
    in a long session, a token "not yet valid" for ten minutes from collection has become valid."""
    global NOW  # noqa: PLW0603
    NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "identity"


def test_a_token_of_the_local_issuer_is_accepted_with_its_name_and_roles(folder: Path) -> None:
    token = mint(folder, "alice", ["Scheduler.Reader"], now=NOW)
    claims = LocalSignIn.in_folder(folder).claims(token)
    assert claims is not None
    assert (claims["name"], claims["roles"], claims["oid"]) == ("alice", ["Scheduler.Reader"], object_id_of("alice"))
    assert object_id_of("alice") == object_id_of("alice") != object_id_of("bob")


def test_the_key_is_kept_and_readable_by_its_owner_only(folder: Path) -> None:
    mint(folder, "alice", [], now=NOW)
    path = folder / identity.KEY_NAME
    assert path.stat().st_mode & 0o777 == 0o600
    first = path.read_bytes()
    mint(folder, "bob", [], now=NOW)
    assert path.read_bytes() == first


def _unsigned(claims: dict[str, object]) -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."


def _good_claims() -> dict[str, object]:
    return {"iss": ISSUER, "aud": AUDIENCE, "iat": int(NOW.timestamp()), "nbf": int(NOW.timestamp()),
            "exp": int((NOW + timedelta(hours=1)).timestamp()), "oid": object_id_of("mallory"),
            "name": "mallory", "roles": ["Scheduler.Contributor"]}  # fmt: skip


def refused_tokens(folder: Path, elsewhere: Path) -> dict[str, str]:
    public_pem = identity.signing_key(folder).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return {
        "expired": mint(folder, "alice", ["Scheduler.Reader"], now=NOW - timedelta(hours=2)),
        "not yet valid": mint(folder, "alice", ["Scheduler.Reader"], now=NOW, not_before=NOW + timedelta(minutes=10)),
        "another audience": mint(folder, "alice", ["Scheduler.Reader"], now=NOW, audience="api://other"),
        "another issuer": mint(folder, "alice", ["Scheduler.Reader"], now=NOW, issuer="https://login.microsoftonline.com/evil"),
        "signed with another key": mint(elsewhere, "alice", ["Scheduler.Contributor"], now=NOW),
        "alg none": _unsigned(_good_claims()),
        "alg none, signature left on": _unsigned(_good_claims())
        + mint(folder, "alice", [], now=NOW).rsplit(".", 1)[1],
        "HS256 keyed with the public key": _hs256(_good_claims(), public_pem),
        "not a token": "not-a-token",
    }


def _hs256(claims: dict[str, object], secret: bytes) -> str:
    # PyJWT refuses to sign with a PEM as an HMAC secret, so the token is put together by hand.
    import hashlib  # noqa: PLC0415
    import hmac  # noqa: PLC0415

    def part(value: dict[str, object]) -> bytes:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=")

    signed = part({"alg": "HS256", "typ": "JWT"}) + b"." + part(claims)
    signature = base64.urlsafe_b64encode(hmac.new(secret, signed, hashlib.sha256).digest()).rstrip(b"=")
    return (signed + b"." + signature).decode()


@pytest.mark.parametrize("kind", ["expired", "not yet valid", "another audience", "another issuer",
                                  "signed with another key", "alg none", "alg none, signature left on",
                                  "HS256 keyed with the public key", "not a token"])  # fmt: skip
def test_a_bad_token_is_refused(folder: Path, tmp_path: Path, kind: str) -> None:
    token = refused_tokens(folder, tmp_path / "elsewhere")[kind]
    sign_in = LocalSignIn.in_folder(folder)
    assert sign_in.claims(token) is None
    passed = sign_in.platform_headers({"Authorization": f"Bearer {token}"})
    assert not {name.lower() for name in passed} & set(identity.PRINCIPAL_HEADERS)


def test_the_refused_tokens_differ_from_a_good_one_only_in_what_is_tested(folder: Path) -> None:
    # The test above would pass for a host that refuses everything: a good token passes here.
    good = jwt.decode(
        mint(folder, "alice", ["Scheduler.Reader"], now=NOW),
        identity.signing_key(folder).public_key(),
        algorithms=["RS256"], audience=AUDIENCE, issuer=ISSUER,
    )  # fmt: skip
    assert good["roles"] == ["Scheduler.Reader"]


def test_principal_headers_a_client_sends_are_dropped_and_a_good_tokens_caller_passed_on(folder: Path) -> None:
    forged = principal_headers({"oid": "forged", "name": "eve", "roles": ["Scheduler.Contributor"]})
    sign_in = LocalSignIn.in_folder(folder)
    assert not set(sign_in.platform_headers(forged))
    token = mint(folder, "alice", ["Scheduler.Reader"], now=NOW)
    passed = sign_in.platform_headers(forged | {"Authorization": f"Bearer {token}"})
    principal = json.loads(base64.b64decode(passed["X-MS-CLIENT-PRINCIPAL"]))
    claims = {(claim["typ"], claim["val"]) for claim in principal["claims"]}
    assert ("roles", "Scheduler.Reader") in claims and ("roles", "Scheduler.Contributor") not in claims
    assert passed["X-MS-CLIENT-PRINCIPAL-NAME"] == "alice"
    assert passed["X-MS-CLIENT-PRINCIPAL-ID"] == object_id_of("alice")


def test_the_command_prints_a_token_the_host_accepts(folder: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setenv(identity.FOLDER_SETTING, str(folder))
    assert identity.main(["token", "--name", "alice", "--role", "Scheduler.Reader"]) == 0
    claims = LocalSignIn.in_folder(folder).claims(capsys.readouterr().out.strip())
    assert claims is not None and claims["roles"] == ["Scheduler.Reader"]
    assert identity.main(["token", "--name", "alice", "--role", "Scheduler.Owner"]) == 2
