"""The HTTP server's ``TokenVerifier`` (the MCP SDK's interface): API keys and/or OAuth
JWTs, as ``SMRITI_AUTH`` asks (see ``smriti.auth``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from mcp.server.auth.provider import AccessToken, TokenVerifier

from smriti.auth.keys import KeyStore, keys_file, split_key
from smriti.auth.oauth import OAuthVerifier, scopes_of
from smriti.auth.principals import PrincipalMap, key_principal
from smriti.errors import ConfigError
from smriti.logs import get_logger

if TYPE_CHECKING:
    from smriti.config import Settings

log = get_logger(__name__)

#: The issuer recorded in the claims of a token that is an API key.
KEY_ISSUER = "smriti-api-keys"
#: The claim of a verified token that holds its namespaced principal
#: (``smriti.auth.principals``): ``key:<id>`` or ``oauth:<issuer>#<subject>``.
PRINCIPAL_CLAIM = "smriti_principal"


@dataclass(frozen=True, slots=True)
class ScopeNames:
    """The scope names that grant reading and writing memories."""

    read: str = "smriti:read"
    write: str = "smriti:write"

    def of(self, kind: str) -> str:
        """The scope name for ``read`` or ``write``."""
        return self.write if kind == "write" else self.read


class SmritiTokenVerifier(TokenVerifier):
    """Verifies API keys and/or OAuth JWTs; the subject of a verified token is its user."""

    def __init__(
        self,
        keys: KeyStore | None,
        oauth: OAuthVerifier | None,
        scopes: ScopeNames | None = None,
        principals: PrincipalMap | None = None,
    ) -> None:
        self.keys = keys
        self.oauth = oauth
        self.scopes = scopes or ScopeNames()
        self.principals = principals or PrincipalMap()

    @property
    def modes(self) -> list[str]:
        """The kinds of token accepted, for the log."""
        return [m for m, on in (("keys", self.keys), ("oauth", self.oauth)) if on]

    async def verify_token(self, token: str) -> AccessToken | None:
        """The SDK's interface: the verified token, or None when it is refused."""
        result = await self.check(token)
        return result if isinstance(result, AccessToken) else None

    async def check(self, token: str) -> AccessToken | str:
        """The verified token, or a short reason why it is refused (safe to show the
        caller: it never contains the token)."""
        if self.keys is not None and split_key(token) is not None:
            return self._from_key(token)
        if self.oauth is not None:
            claims = await anyio.to_thread.run_sync(self.oauth.check, token)
            return claims if isinstance(claims, str) else self._from_claims(token, claims)
        return "not a Smriti API key"

    def _from_key(self, token: str) -> AccessToken | str:
        assert self.keys is not None
        try:
            key = self.keys.check(token)
        except ConfigError as exc:  # a damaged key file refuses every key, loudly
            log.error("API keys cannot be checked", error=str(exc))
            return "the server cannot read its API keys"
        if isinstance(key, str):
            return key
        principal = key_principal(key.id, key.user)
        return AccessToken(
            token=token,
            client_id=f"key:{key.id}",
            scopes=[self.scopes.of(s) for s in key.scopes],
            subject=principal.user,
            claims={"iss": KEY_ISSUER, "key_id": key.id, PRINCIPAL_CLAIM: principal.id},
        )

    def _from_claims(self, token: str, claims: dict[str, Any]) -> AccessToken | str:
        """The verified token; its subject is the memory of the token's namespaced
        principal (``smriti.auth.principals``), never a key user's by accident."""
        assert self.oauth is not None
        try:
            principal = self.principals.principal(
                str(claims["iss"]), str(claims[self.oauth.user_claim])
            )
        except ConfigError as exc:
            log.error("OAuth principals cannot be mapped", error=str(exc))
            return "the server cannot map OAuth subjects to users"
        client = claims.get("client_id") or claims.get("azp") or "oauth"
        exp = claims.get("exp")
        return AccessToken(
            token=token,
            client_id=str(client),
            scopes=scopes_of(claims),
            expires_at=int(exp) if isinstance(exp, int | float) else None,
            resource=self.oauth.audience,
            subject=principal.user,
            claims={
                "iss": claims.get("iss"),
                "sub": claims.get("sub"),
                PRINCIPAL_CLAIM: principal.id,
            },
        )


def auth_modes(settings: Settings) -> tuple[bool, bool]:
    """(API keys, OAuth) as ``SMRITI_AUTH`` asks; ``auto``: OAuth when an issuer is
    set, keys when the key file exists."""
    mode = settings.auth
    if mode == "auto":
        return keys_file(settings).exists(), bool(settings.oauth_issuer)
    return "keys" in mode, "oauth" in mode


def build_verifier(settings: Settings, resource_url: str) -> SmritiTokenVerifier | None:
    """The verifier ``settings`` ask for, or None when the server takes no tokens.

    ``resource_url`` is this server's MCP endpoint as clients reach it, the default
    audience of OAuth tokens. ConfigError when OAuth is asked for without an issuer.
    """
    use_keys, use_oauth = auth_modes(settings)
    if not (use_keys or use_oauth):
        return None
    if use_oauth and not settings.oauth_issuer:
        raise ConfigError(
            f"SMRITI_AUTH={settings.auth} needs SMRITI_OAUTH_ISSUER (the URL of the token issuer)"
        )
    store = KeyStore(keys_file(settings)) if use_keys else None
    if store is not None and not store.all_keys():
        log.warning(
            "no API keys yet: every request is refused until one is made",
            hint="smriti keys create USER",
            file=str(store.path),
        )
    oauth = None
    if use_oauth:
        oauth = OAuthVerifier(
            settings.oauth_issuer,
            settings.oauth_audience or resource_url,
            settings.oauth_jwks_url,
            settings.oauth_user_claim,
        )
    scopes = ScopeNames(settings.oauth_read_scope, settings.oauth_write_scope)
    principals = PrincipalMap(settings.principals_file) if use_oauth else None
    return SmritiTokenVerifier(store, oauth, scopes, principals)
