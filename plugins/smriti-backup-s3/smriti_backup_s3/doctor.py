"""``smriti doctor``'s probe of the S3 endpoint: any HTTP answer counts (S3 answers 403
to anonymous requests)."""

from __future__ import annotations

import re
import urllib.error
import urllib.request

from smriti import DoctorCheck

#: Seconds to wait for the endpoint.
TIMEOUT = 2.0
NAME = "s3 endpoint"


def endpoint_url(endpoint: str, region: str) -> str:
    """``S3_ENDPOINT``, or AWS's endpoint of ``S3_REGION`` (``us-east-1`` when unset)."""
    return endpoint or f"https://s3.{region or 'us-east-1'}.amazonaws.com"


def http_endpoint(url: str) -> DoctorCheck:
    """GET ``url``; never raises."""
    shown = re.sub(r"(?<=://)[^/@\s]+@", "***@", url)
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:  # noqa: S310
            code = response.status
    except urllib.error.HTTPError as exc:
        code = exc.code
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        text = " ".join(str(reason).split()) or type(exc).__name__
        fix = "start the server or correct S3_ENDPOINT"
        return DoctorCheck(NAME, "fail", f"{shown} does not answer ({text})", fix)
    return DoctorCheck(NAME, "ok", f"{shown} answers (HTTP {code})")
