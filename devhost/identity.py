"""Local sign-in: the local host plays the part of the platform's authentication (App Service
Authentication with Entra ID) for machines without Azure.

A local issuer signs tokens with an RSA key kept beside the function key (`.azurite/`, or the
folder SCHEDULER_IDENTITY_FOLDER names); the host accepts a bearer token only if its signature
(RS256, never `alg: none`), issuer, audience, expiry and not-before are right, and then passes
the caller on as the platform does, in `X-MS-CLIENT-PRINCIPAL` (base64 JSON of the claims) and
`X-MS-CLIENT-PRINCIPAL-ID`/`-NAME`/`-IDP`. Whatever a client sent in those headers is dropped
first, as the platform drops it. A token that fails a check is dropped too (and the reason
logged), so the app answers 401 for it as it answers any request without a caller.

    python -m devhost.identity token --name alice --role Scheduler.Reader

prints a token the local host accepts (an hour long by default); `--role` may be repeated.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import sys
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

# PyJWT and cryptography are imported where they are used: a worker of the local host imports
# this module, and they are a tenth of a second of its start that a host without sign-in
# (WEBSITE_AUTH_ENABLED off) never needs.
if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import rsa

log = logging.getLogger("devhost.identity")

ROOT = Path(__file__).resolve().parent.parent
FOLDER_SETTING = "SCHEDULER_IDENTITY_FOLDER"
DEFAULT_FOLDER = ROOT / ".azurite"  # beside the function key (devhost.__main__.KEY_NAME)
KEY_NAME = "identity-key.pem"
# The local issuer's tenant and the app registration the tokens are for: fixed, local names.
TENANT = "00000000-0000-0000-0000-00000000c0de"
ISSUER = f"https://sts.local.devhost/{TENANT}/"
AUDIENCE = "api://azure-scheduler-local"
CLIENT_ID = "00000000-0000-0000-0000-0000000c11e7"  # the "app" the tokens are issued to
ALGORITHM = "RS256"
LEEWAY = timedelta(seconds=30)  # clock skew allowed on exp and nbf, as Entra ID's validators do
PRINCIPAL_HEADERS = ("x-ms-client-principal", "x-ms-client-principal-id",
                     "x-ms-client-principal-name", "x-ms-client-principal-idp")  # fmt: skip
# Easy Auth's claim types for the name and the roles of a principal.
NAME_CLAIM = "name"
ROLE_CLAIM = "roles"


def identity_folder(environment: Mapping[str, str] = os.environ) -> Path:
    return Path(environment.get(FOLDER_SETTING) or DEFAULT_FOLDER)


def signing_key(folder: Path) -> rsa.RSAPrivateKey:
    """The local issuer's key, kept in `folder` (readable by its owner only); made on first use."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: PLC0415

    path = folder / KEY_NAME
    try:
        loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except FileNotFoundError:
        pass
    else:
        if not isinstance(loaded, rsa.RSAPrivateKey):
            raise ValueError(f"{path} does not hold an RSA private key")
        return loaded
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    folder.mkdir(parents=True, exist_ok=True)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    # O_EXCL: two processes starting at once keep the first one's key, never a mix.
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return signing_key(folder)
    with os.fdopen(descriptor, "wb") as file:
        file.write(pem)
    return key


def object_id_of(name: str) -> str:
    """A stable object id for a local name: the same person each time they get a token."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"devhost-identity:{name}"))


def mint(
    folder: Path,
    name: str,
    roles: Iterable[str],
    *,
    now: datetime,
    lifetime: timedelta = timedelta(hours=1),
    audience: str = AUDIENCE,
    issuer: str = ISSUER,
    not_before: datetime | None = None,
) -> str:
    """A token of the local issuer for `name` holding `roles` (other audiences, issuers and
    times only to test that the host refuses them)."""
    claims = {
        "iss": issuer,
        "aud": audience,
        "iat": int(now.timestamp()),
        "nbf": int((not_before or now).timestamp()),
        "exp": int((now + lifetime).timestamp()),
        "tid": TENANT,
        "oid": object_id_of(name),
        "sub": object_id_of(name),
        "appid": CLIENT_ID,
        "name": name,
        "preferred_username": name,
        "roles": list(roles),
        "ver": "1.0",
    }
    import jwt  # noqa: PLC0415

    return jwt.encode(claims, signing_key(folder), algorithm=ALGORITHM)


@dataclass(frozen=True)
class LocalSignIn:
    """The platform's part, locally: bearer tokens checked, the caller passed on in headers."""

    public_key: rsa.RSAPublicKey

    @classmethod
    def in_folder(cls, folder: Path) -> LocalSignIn:
        return cls(signing_key(folder).public_key())

    def claims(self, token: str) -> dict[str, object] | None:
        """The token's claims if it is good, else None (why is logged)."""
        import jwt  # noqa: PLC0415

        try:
            # One algorithm only: a token that says `none` or HS256 is refused before any check.
            decoded: dict[str, object] = jwt.decode(
                token,
                self.public_key,
                algorithms=[ALGORITHM],
                audience=AUDIENCE,
                issuer=ISSUER,
                leeway=LEEWAY,
                options={"require": ["exp", "nbf", "iat", "iss", "aud"]},
            )
        except jwt.PyJWTError as refused:
            log.warning("a bearer token was refused: %s", refused)
            return None
        return decoded

    def platform_headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        """`headers` as the app receives them: any principal headers the client sent dropped,
        and the caller of a good bearer token added."""
        passed = {
            name: value for name, value in headers.items() if name.lower() not in PRINCIPAL_HEADERS
        }
        authorization = next(
            (value for name, value in headers.items() if name.lower() == "authorization"), ""
        )
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return passed
        claims = self.claims(token.strip())
        if claims is None:
            return passed
        return passed | principal_headers(claims)


def principal_headers(claims: Mapping[str, object]) -> dict[str, str]:
    """The headers the platform passes a signed-in caller on in."""
    pairs = []
    for claim, value in claims.items():
        for each in value if isinstance(value, list) else [value]:
            pairs.append({"typ": claim, "val": str(each)})
    principal = {
        "auth_typ": "aad",
        "claims": pairs,
        "name_typ": NAME_CLAIM,
        "role_typ": ROLE_CLAIM,
    }
    return {
        "X-MS-CLIENT-PRINCIPAL": base64.b64encode(json.dumps(principal).encode()).decode(),
        "X-MS-CLIENT-PRINCIPAL-ID": str(claims.get("oid", "")),
        "X-MS-CLIENT-PRINCIPAL-NAME": str(claims.get("name", "")),
        "X-MS-CLIENT-PRINCIPAL-IDP": "aad",
    }


def _arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m devhost.identity", description="Tokens of the local host's issuer."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    token = commands.add_parser("token", help="print a token the local host accepts")
    token.add_argument("--name", required=True, help="who the token is for, such as alice")
    token.add_argument(
        "--role",
        action="append",
        default=[],
        help="an app role (Scheduler.Reader, Scheduler.Operator, Scheduler.Contributor); repeat "
        "for more; none: the caller has only what role assignments give them",
    )
    token.add_argument("--minutes", type=int, default=60, help="how long it lasts (default 60)")
    return parser


def main(argv: list[str] | None = None) -> int:
    options = _arguments().parse_args(argv)
    known = {"scheduler.reader", "scheduler.operator", "scheduler.contributor"}
    unknown = [role for role in options.role if role.lower() not in known]
    if unknown:
        print(f"unknown role {unknown[0]!r}: use {', '.join(sorted(known))}", file=sys.stderr)
        return 2
    if not 1 <= options.minutes <= 24 * 60:
        print("--minutes must be between 1 and 1440", file=sys.stderr)
        return 2
    token = mint(
        identity_folder(),
        options.name,
        options.role,
        now=datetime.now(UTC),
        lifetime=timedelta(minutes=options.minutes),
    )
    print(token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
