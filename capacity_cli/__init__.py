"""``capacity``: the Capacity Orchestrator's command line and MCP server (issue 18, docs/cli.md).

The CLI speaks only the REST API of docs/api.md: to a deployed stack (its ``ApiUrl`` output, requests
signed with SigV4 from the caller's AWS profile), to any API base URL (``make serve``), or to the embedded
local cloud (``--local``: the whole application in this process, on a virtual clock). It never touches AWS
resources of the stack directly and holds no capacity logic of its own: the API validates, decides and
records; the CLI asks, shows and confirms.
"""

from __future__ import annotations

__version__ = "0.1.0"
