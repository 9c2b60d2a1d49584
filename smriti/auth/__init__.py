"""Who is calling: bearer tokens of the HTTP server, as the MCP SDK's ``TokenVerifier``.

Two kinds of token are accepted (``SMRITI_AUTH``): per-user API keys made with
``smriti keys create USER`` (``smriti.auth.keys``) and JWT access tokens of an OAuth
2.1 issuer (``smriti.auth.oauth``). Either way the verified ``AccessToken`` carries the
user whose memory the call uses as its ``subject`` and the scopes it grants under the
server's scope names (``SMRITI_OAUTH_READ_SCOPE``, ``SMRITI_OAUTH_WRITE_SCOPE``; an
API key's ``read`` and ``write`` are mapped to them), so the rest of the server asks
one question: does this caller hold the read (or write) scope? An OAuth subject's
user name is qualified by its issuer unless the operator maps it
(``smriti.auth.principals``); the token's ``smriti_principal`` claim names the caller
(``key:<id>`` or ``oauth:<issuer>#<subject>``, read with
``smriti.mcp_server.users.caller_principal``).

The SDK-facing parts live in ``smriti.auth.verifier`` (imported by the HTTP server
only), so that ``smriti keys`` stays quick to start.
"""
