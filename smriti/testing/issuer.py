"""A local OAuth issuer for tests and benchmarks: RFC 8414 metadata and a JWKS served on
127.0.0.1, and RS256 access tokens it signs (``pyjwt`` and ``cryptography``).

Point a server at it with ``SMRITI_OAUTH_ISSUER=issuer.url``; its tokens carry the
read and write scopes unless told otherwise.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LocalIssuer:
    """An OAuth issuer on 127.0.0.1 (close it with ``close``)."""

    def __init__(self) -> None:
        from cryptography.hazmat.primitives.asymmetric import rsa

        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def _documents(self) -> dict[str, Any]:
        import jwt

        public = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {
            "/.well-known/oauth-authorization-server": {
                "issuer": self.url,
                "jwks_uri": f"{self.url}/jwks.json",
                "authorization_endpoint": f"{self.url}/authorize",
                "token_endpoint": f"{self.url}/token",
                "response_types_supported": ["code"],
            },
            "/jwks.json": {"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]},
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                body = issuer._documents().get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler

    def token(self, audience: str, subject: str, **claims: Any) -> str:
        """A signed access token for ``subject`` (ten minutes), for ``audience``."""
        import jwt

        now = int(time.time())
        payload = {
            "iss": self.url,
            "aud": audience,
            "sub": subject,
            "iat": now,
            "exp": now + 600,
            "scope": "smriti:read smriti:write",
            "client_id": "test-client",
            **claims,
        }
        return jwt.encode(payload, self.key, algorithm="RS256", headers={"kid": "k1"})

    def close(self) -> None:
        """Stop serving."""
        self.httpd.shutdown()
        self.httpd.server_close()
