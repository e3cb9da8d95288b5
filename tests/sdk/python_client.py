"""What the official Python MCP SDK (PyPI `mcp`) surfaces for each testbed scenario.

Usage: python_client.py URL [--eras legacy,modern] [--timeout SECONDS]

Connects to URL (a Streamable HTTP endpoint: the testbed's /mcp, directly or through strata)
with the SDK's high-level `mcp.Client`, once per protocol era:
- legacy: `mode="legacy"`, the initialize handshake (2025-11-25, sessions, GET stream, DELETE);
- modern: `mode="auto"`, the `server/discover` probe, then stateless 2026-07-28.
Per era it lists the tools, then, for every scenario, opens a fresh client (so one scenario
that breaks a session cannot change what the next one sees), calls the tool one or more times,
pings, and closes. Each call is bounded by --timeout.

Prints one JSON document on stdout. Everything in it is deterministic for a given SDK and
testbed, except the `volatile` object, which holds what differs between a direct connection
and one through a proxy (the Host, Via and X-Forwarded-* headers the server saw, the port in
error messages). `tests/it/sdk_clients.rs` compares the rest byte for byte, direct vs proxied.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from importlib.metadata import version
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

# Sent on every request; echo_headers must show it unchanged.
AUTHORIZATION = "Bearer strata-sdk-test-token"
# Request headers a proxy adds, rewrites, or (hop-by-hop, RFC 9110 §7.6.1) drops: reported
# under `volatile`, not compared.
PROXY_HEADERS = (
    "host",
    "via",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "forwarded",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
)

# (scenario, arguments, how many calls in one session, eras). The order is the testbed's.
SCENARIOS: list[tuple[str, dict[str, Any] | None, int, tuple[str, ...]]] = [
    ("ok", None, 1, ("legacy", "modern")),
    ("tool_error", None, 1, ("legacy", "modern")),
    ("jsonrpc_error", None, 1, ("legacy", "modern")),
    ("http_503_then_200", None, 2, ("legacy", "modern")),
    ("read_flaky", None, 2, ("legacy", "modern")),
    ("write_flaky", None, 2, ("legacy", "modern")),
    ("http_429", None, 1, ("legacy", "modern")),
    ("http_500_success_body", None, 1, ("legacy", "modern")),
    ("input_required", None, 1, ("legacy", "modern")),
    ("legacy_result", None, 1, ("legacy", "modern")),
    ("content_not_array", None, 1, ("legacy", "modern")),
    ("wrong_id", None, 1, ("legacy", "modern")),
    ("result_and_error", None, 1, ("legacy", "modern")),
    ("bad_jsonrpc_version", None, 1, ("legacy", "modern")),
    ("malformed_json", None, 1, ("legacy", "modern")),
    ("sse_progress", None, 1, ("legacy", "modern")),
    ("sse_closed_early", None, 1, ("legacy", "modern")),
    ("sse_final_error", None, 1, ("legacy", "modern")),
    ("sse_server_request", None, 1, ("legacy",)),
    ("sse_drip", {"count": 3, "interval_ms": 50}, 1, ("legacy", "modern")),
    ("sse_resumable", None, 1, ("legacy",)),
    ("sse_reset", None, 1, ("legacy", "modern")),
    ("json_reset", None, 1, ("legacy", "modern")),
    ("large_result", {"bytes": 65536}, 1, ("legacy", "modern")),
    ("slow", {"ms": 100}, 1, ("legacy", "modern")),
    ("empty_202", None, 1, ("legacy", "modern")),
    ("wrong_content_type", None, 1, ("legacy", "modern")),
    ("echo_headers", None, 1, ("legacy", "modern")),
]
# Calls whose answer never reaches the waiting request (the SDK drops it), so they end by
# our timeout; a shorter one keeps the run quick.
HANGS = {"wrong_id": 2.0}


class Normaliser:
    """Replaces the parts of error text that name the endpoint (its port differs direct vs proxied)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.netloc = parts.netloc
        self.url = url

    def text(self, s: str) -> str:
        return s.replace(self.url, "<URL>").replace(self.netloc, "<HOST>")


def surfaced_exception(e: BaseException, norm: Normaliser) -> dict[str, Any]:
    """An exception as comparable data: its type, and the JSON-RPC code/message/data if any."""
    if isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        return surfaced_exception(e.exceptions[0], norm)
    out: dict[str, Any] = {"raised": type(e).__name__}
    if isinstance(e, MCPError):
        out["code"] = e.code
        out["message"] = norm.text(e.message)
        if e.data is not None:
            out["data"] = json.loads(norm.text(json.dumps(e.data, sort_keys=True)))
    elif isinstance(e, TimeoutError):
        pass
    elif hasattr(e, "errors") and callable(e.errors):  # pydantic.ValidationError
        out["errors"] = sorted({f"{'.'.join(map(str, err['loc']))}: {err['type']}" for err in e.errors()})
    else:
        out["message"] = norm.text(str(e))
    return out


def surfaced_result(result: types.CallToolResult) -> dict[str, Any]:
    dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    out: dict[str, Any] = {"isError": dumped.get("isError", False), "content": []}
    for block in dumped.get("content", []):
        text = block.get("text")
        if isinstance(text, str) and len(text) > 4096:
            # large_result: its length and digest, not 64 KiB of it.
            digest = hashlib.sha256(text.encode()).hexdigest()[:16]
            block = {**block, "text": f"<{len(text)} chars, sha256 {digest}>"}
        out["content"].append(block)
    for key in ("structuredContent", "resultType", "_meta"):
        if key in dumped:
            out[key] = dumped[key]
    return out


def echoed_headers(result: dict[str, Any], volatile: dict[str, Any], session_id: str | None) -> None:
    """echo_headers: split the headers the server saw into compared and volatile parts."""
    if result.get("isError") or not result.get("content"):
        return
    seen = json.loads(result["content"][0]["text"])
    compared: dict[str, Any] = {}
    for name, value in sorted(seen.items()):
        if name in PROXY_HEADERS:
            volatile.setdefault("echo_headers", {})[name] = value
        elif name == "mcp-session-id":
            # Random per session: compared as "is it the one the SDK holds".
            compared[name] = "<the client's session id>" if value == session_id else f"<other: {value}>"
        else:
            compared[name] = value
    result["content"][0]["text"] = compared


async def run_scenario(
    url: str,
    era: str,
    name: str,
    args: dict[str, Any] | None,
    times: int,
    timeout: float,
    norm: Normaliser,
    volatile: dict[str, Any],
) -> dict[str, Any]:
    progress: list[list[Any]] = []
    callbacks: list[str] = []
    session_ids: list[str] = []

    async def on_response(response: httpx2.Response) -> None:
        sid = response.headers.get("mcp-session-id")
        if sid and sid not in session_ids:
            session_ids.append(sid)

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append([p, total])

    async def on_roots(context: Any) -> types.ListRootsResult:
        callbacks.append("roots/list")
        return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/strata-sdk", name="sdk")])

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        callbacks.append(f"elicitation: {params.message}")
        return types.ElicitResult(action="accept", content={})

    http = create_mcp_http_client(headers={"Authorization": AUTHORIZATION})
    http.event_hooks["response"].append(on_response)
    record: dict[str, Any] = {"scenario": name, "calls": []}
    call_timeout = HANGS.get(name, timeout)
    try:
        async with http:
            with anyio.fail_after(timeout * (times + 3) + call_timeout):
                client = Client(
                    streamable_http_client(url, http_client=http),
                    mode="legacy" if era == "legacy" else "auto",
                    list_roots_callback=on_roots,
                    elicitation_callback=on_elicit,
                    read_timeout_seconds=call_timeout,
                    cache=None,
                )
                async with client:
                    for _ in range(times):
                        progress.clear()
                        callbacks.clear()
                        entry: dict[str, Any] = {}
                        try:
                            with anyio.fail_after(call_timeout):
                                result = await client.call_tool(name, args, progress_callback=on_progress)
                            entry["result"] = surfaced_result(result)
                            if name == "echo_headers":
                                sid = session_ids[0] if session_ids else None
                                echoed_headers(entry["result"], volatile.setdefault(era, {}), sid)
                        except Exception as e:  # what the SDK surfaced is the point
                            entry["error"] = surfaced_exception(e, norm)
                        if progress:
                            entry["progress"] = list(progress)
                        if callbacks:
                            entry["callbacks"] = list(callbacks)
                        record["calls"].append(entry)
                    try:
                        with anyio.fail_after(timeout):
                            await client.send_ping()
                        record["ping_after"] = "ok"
                    except Exception as e:
                        record["ping_after"] = surfaced_exception(e, norm)
    except Exception as e:  # connect or close failed, or the whole scenario timed out
        record["session_error"] = surfaced_exception(e, norm)
    record["sessions"] = len(session_ids)
    return record


async def run_era(
    url: str, era: str, timeout: float, norm: Normaliser, volatile: dict[str, Any]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    http = create_mcp_http_client(headers={"Authorization": AUTHORIZATION})
    async with http:
        with anyio.fail_after(timeout * 3):
            client = Client(
                streamable_http_client(url, http_client=http),
                mode="legacy" if era == "legacy" else "auto",
                cache=None,
            )
            async with client:
                out["protocol_version"] = client.protocol_version
                info = client.server_info
                out["server_info"] = info.model_dump(mode="json", exclude_none=True) if info else None
                tools = await client.list_tools()
                out["tools"] = sorted(t.name for t in tools.tools)
    out["scenarios"] = []
    for name, args, times, eras in SCENARIOS:
        if era in eras:
            out["scenarios"].append(await run_scenario(url, era, name, args, times, timeout, norm, volatile))
    return out


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--eras", default="legacy,modern")
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--scenarios", default="", help="comma-separated subset (default: all)")
    opts = ap.parse_args()
    if opts.scenarios:
        wanted = set(opts.scenarios.split(","))
        SCENARIOS[:] = [s for s in SCENARIOS if s[0] in wanted]
    norm = Normaliser(opts.url)
    volatile: dict[str, Any] = {}
    doc: dict[str, Any] = {
        "client": {"sdk": "python", "package": "mcp", "version": version("mcp")},
        "eras": {},
    }
    started = time.monotonic()
    for era in opts.eras.split(","):
        doc["eras"][era] = await run_era(opts.url, era, opts.timeout, norm, volatile)
    volatile["elapsed_s"] = round(time.monotonic() - started, 2)
    doc["volatile"] = volatile
    json.dump(doc, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    anyio.run(main)
