"""The Claude Desktop extension's entry point: the ``smriti`` MCP server over stdio.

The host passes the extension's settings as environment variables; a setting the user
left empty arrives as an empty string and means "the default" (for ACCESSING_USER an
empty value is otherwise refused, to catch templating slips), so it is removed first.
"""

import os
import sys

for name in ("STORAGE_LOCATION", "ACCESSING_USER", "LLM_API_KEY"):
    value = os.environ.get(name)
    # the host leaves an unset optional setting blank or as its unexpanded placeholder
    if value is not None and (not value.strip() or value.startswith("${user_config.")):
        del os.environ[name]

from smriti.cli import main  # noqa: E402 - after the environment is settled

if __name__ == "__main__":
    sys.exit(main([]))
