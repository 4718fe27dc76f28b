"""An independent MCP client (the `mcp` package from PyPI) driving `lsm mcp serve`.

Usage: python mcp_client.py stdio LSM_BIN WORKDIR [lsm arguments...]
       python mcp_client.py http URL

Connects, lists the tools, calls `query_context` (when served) and `run_agent`, and prints
one JSON object: {"tools": [...], "query_context": {...}, "run_agent": {...},
"bad_agent": {...}}. The Rust test (tests/tests/e2e/mcp_serve.rs) checks it.
"""

import asyncio
import json
import sys

from mcp import Client, StdioServerParameters


def result(r):
    return {
        "is_error": bool(r.is_error),
        "text": "".join(getattr(c, "text", "") for c in r.content),
    }


async def main():
    mode = sys.argv[1]
    if mode == "stdio":
        lsm, cwd, extra = sys.argv[2], sys.argv[3], sys.argv[4:]
        server = StdioServerParameters(command=lsm, args=["mcp", "serve", *extra], cwd=cwd)
    else:
        server = sys.argv[2]
    out = {}
    async with Client(server) as client:
        tools = await client.list_tools()
        out["tools"] = sorted(t.name for t in tools.tools)
        if "query_context" in out["tools"]:
            out["query_context"] = result(
                await client.call_tool("query_context", {"query": "wing lift"})
            )
        out["run_agent"] = result(
            await client.call_tool(
                "run_agent",
                {"agent": "general", "task": "say hello", "max_tokens_budget": 5000},
            )
        )
        out["bad_agent"] = result(
            await client.call_tool("run_agent", {"agent": "research", "task": "x"})
        )
    print(json.dumps(out))


asyncio.run(main())
