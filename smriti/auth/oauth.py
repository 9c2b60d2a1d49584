"""OAuth 2.1 resource-server mode: access tokens are JWTs from one configured issuer.

A token is accepted when its signature checks against the issuer's JWKS (an asymmetric
algorithm only: never ``none`` or a shared secret), ``iss`` is ``SMRITI_OAUTH_ISSUER``,
``aud`` contains this server's audience (``SMRITI_OAUTH_AUDIENCE``, by default the
resource URL ``SMRITI_PUBLIC_URL``, as RFC 8707 binds tokens to their resource), it has
not expired, and its user claim (``SMRITI_OAUTH_USER_CLAIM``, ``sub``) is a valid user
name. The JWKS URL is ``SMRITI_OAUTH_JWKS_URL`` or the ``jwks_uri`` of the issuer's
metadata (RFC 8414 ``/.well-known/oauth-authorization-server``, else OpenID
``/.well-known/openid-configuration``), looked up on the first token and kept.
Signing keys are cached and fetched again when a token names an unknown key id, so a
key rotation needs no restart.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import urllib.request
from typing import Any

import jwt

from smriti.config import validate_user
from smriti.errors import ConfigError, SmritiError
from smriti.logs import get_logger

log = get_logger(__name__)

#: Accepted signing algorithms: public-key ones only.
ALGORITHMS = [
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
]
#: Clock skew tolerated on exp/nbf/iat, in seconds.
LEEWAY_SECONDS = 30
FETCH_TIMEOUT_SECONDS = 10.0
#: After a failed metadata lookup, tokens are refused this long before the next try,
#: so an unreachable issuer is not asked again on every request.
RETRY_SECONDS = 10.0


class IssuerUnavailable(SmritiError):
    """The issuer's metadata or keys could not be fetched."""


class OAuthVerifier:
    """Checks JWT access tokens of one issuer for one audience."""

    def __init__(
        self,
        issuer: str,
        audience: str,
        jwks_url: str = "",
        user_claim: str = "sub",
    ) -> None:
        if not issuer:
            raise ConfigError("SMRITI_OAUTH_ISSUER is not set (the URL of the token issuer)")
        if not audience:
            raise ConfigError(
                "OAuth needs this server's audience: set SMRITI_PUBLIC_URL (the URL clients "
                "use, e.g. https://memory.example.com/mcp) or SMRITI_OAUTH_AUDIENCE"
            )
        self.issuer = issuer
        self.audience = audience
        self.user_claim = user_claim
        self._jwks_url = jwks_url
        self._client: jwt.PyJWKClient | None = None
        self._failed: tuple[float, IssuerUnavailable] | None = None
        self._lock = threading.Lock()

    def check(self, token: str) -> dict[str, Any] | str:
        """The token's claims (with the user name under ``smriti_user``), or why it is
        refused. Blocking (it may fetch the issuer's keys): call it in a worker thread."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return "not a JWT"
        if header.get("alg") not in ALGORITHMS:
            return f"signing algorithm {str(header.get('alg'))[:20]!r} is not accepted"
        try:
            key = self._keys().get_signing_key_from_jwt(token)
        except IssuerUnavailable as exc:
            return str(exc)
        except jwt.PyJWKClientConnectionError as exc:
            log.warning("the issuer's keys could not be fetched", error=str(exc))
            return "the issuer's signing keys could not be fetched"
        except jwt.PyJWTError:
            return "signed by a key the issuer does not publish"
        return self._claims(token, key.key)

    def _claims(self, token: str, key: Any) -> dict[str, Any] | str:
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=ALGORITHMS,
                audience=self.audience,
                issuer=self.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            return "token expired"
        except jwt.InvalidAudienceError:
            return "token issued for another audience"
        except jwt.InvalidIssuerError:
            return "token from another issuer"
        except jwt.ImmatureSignatureError:
            return "token not valid yet"
        except jwt.PyJWTError as exc:
            return f"invalid token: {str(exc)[:80]}"
        user = claims.get(self.user_claim)
        try:
            claims["smriti_user"] = validate_user(user, f"token claim {self.user_claim!r}")
        except ConfigError as exc:
            return str(exc)
        return claims

    def _keys(self) -> jwt.PyJWKClient:
        with self._lock:
            if self._client is None:
                if self._failed and time.monotonic() - self._failed[0] < RETRY_SECONDS:
                    raise self._failed[1]
                try:
                    url = self._jwks_url or discover_jwks_url(self.issuer)
                except IssuerUnavailable as exc:
                    self._failed = (time.monotonic(), exc)
                    raise
                self._client = jwt.PyJWKClient(
                    url, cache_keys=True, lifespan=300, timeout=FETCH_TIMEOUT_SECONDS
                )
                log.info("OAuth signing keys", jwks_url=url)
            return self._client


def scopes_of(claims: dict[str, Any]) -> list[str]:
    """The scopes a token grants: ``scope`` (space-separated, RFC 9068) or ``scp``."""
    raw = claims.get("scope", claims.get("scp", ""))
    if isinstance(raw, str):
        return raw.split()
    if isinstance(raw, list):
        return [str(s) for s in raw]
    return []


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: RFC 8414 first, then OpenID Connect."""
    parts = urllib.parse.urlsplit(issuer)
    path = parts.path.rstrip("/")
    base = f"{parts.scheme}://{parts.netloc}"
    return [
        f"{base}/.well-known/oauth-authorization-server{path}",
        f"{base}/.well-known/openid-configuration{path}",
        f"{issuer.rstrip('/')}/.well-known/openid-configuration",
    ]


def discover_jwks_url(issuer: str) -> str:
    """The ``jwks_uri`` of the issuer's metadata; IssuerUnavailable when none is found."""
    tried = []
    for url in dict.fromkeys(metadata_urls(issuer)):
        try:
            with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_SECONDS) as response:
                meta = json.loads(response.read())
        except (OSError, ValueError) as exc:
            tried.append(f"{url}: {exc}")
            continue
        if isinstance(meta, dict) and meta.get("jwks_uri"):
            if meta.get("issuer") not in (None, issuer):
                raise IssuerUnavailable(
                    f"the metadata at {url} is for issuer {meta.get('issuer')!r}, not {issuer!r}"
                )
            return str(meta["jwks_uri"])
        tried.append(f"{url}: no jwks_uri")
    log.warning("no OAuth issuer metadata found", issuer=issuer, tried=tried)
    raise IssuerUnavailable(
        "the issuer's metadata could not be fetched; set SMRITI_OAUTH_JWKS_URL or check "
        "SMRITI_OAUTH_ISSUER"
    )
