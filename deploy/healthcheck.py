"""The container's health check: the HTTP server answers on its MCP endpoint.

An unauthenticated GET of /mcp gets 401 (keys or OAuth on) or 4xx (a GET without an MCP
session): any answer below 500 means the server is up and serving. Exit 0 healthy, 1 not.
Only the standard library: it runs with the image's Python, outside the server process.
"""

import os
import sys
import urllib.error
import urllib.request

PORT = os.environ.get("SMRITI_PORT", "8765")
URL = f"http://127.0.0.1:{PORT}/mcp"


def main() -> int:
    """Probe the server once; a status below 500 is healthy."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(URL, timeout=4) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except OSError as exc:
        print(f"unhealthy: {URL}: {exc}", file=sys.stderr)
        return 1
    if status >= 500:
        print(f"unhealthy: {URL} answered {status}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
