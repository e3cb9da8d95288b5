"""Prints, as a Markdown table, what each SDK client surfaced per scenario in the last run of
tests/it/sdk_clients.rs (the documents it leaves in target/tmp/sdk_clients/<client>/).

Usage: python3 tests/sdk/table.py [DIR] [direct|strata]    (stdlib only)
"""

import json
import sys
from pathlib import Path

COLUMNS = [
    ("python", "legacy"),
    ("python", "modern"),
    ("ts-sdk", "legacy"),
    ("ts-client", "legacy"),
    ("ts-client", "modern"),
]


def short_call(call: dict) -> str:
    if "result" in call:
        r = call["result"]
        content = r["content"]
        text = content[0].get("text") if isinstance(content, list) and content else content
        shown = "headers" if isinstance(text, dict) else (text if text else "[]")
        out = ("isError " if r["isError"] else "") + f"`{shown}`"
    else:
        e = call["error"]
        if e["raised"] == "TimeoutError":
            out = "no answer: harness timeout"
        else:
            msg = ", ".join(e["errors"]) if "errors" in e else (e.get("message") or "")
            msg = msg.split("\n")[0]
            msg = "zod issues" if msg == "[" else msg[:44]
            code = f" {e['code']}" if "code" in e else ""
            status = f" (HTTP {e['status']})" if "status" in e else ""
            out = f"{e['raised']}{code}{status}" + (f": {msg}" if msg else "")
    extra = []
    if call.get("progress"):
        extra.append(f"{len(call['progress'])} progress")
    if call.get("callbacks"):
        extra.append("+".join(c.split(":")[0] for c in call["callbacks"]))
    return out + (f" [{', '.join(extra)}]" if extra else "")


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "target/tmp/sdk_clients")
    which = sys.argv[2] if len(sys.argv) > 2 else "direct"
    docs = {}
    for client in {c for c, _ in COLUMNS}:
        path = root / client / f"{which}.json"
        if path.exists():
            docs[client] = json.loads(path.read_text())
    cols = [(c, era) for c, era in COLUMNS if era in docs.get(c, {}).get("eras", {})]
    rows: dict[str, dict] = {}
    for client, era in cols:
        for sc in docs[client]["eras"][era]["scenarios"]:
            cell = " → ".join(short_call(c) for c in sc["calls"])
            if "session_error" in sc:
                cell = (cell + " " if cell else "") + f"client failed: {sc['session_error']['raised']}"
            rows.setdefault(sc["scenario"], {})[(client, era)] = cell
    heads = [f"{docs[c]['client']['package']} {docs[c]['client']['version']} {era}" for c, era in cols]
    print("| scenario | " + " | ".join(heads) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for name, cells in rows.items():
        print(f"| {name} | " + " | ".join(cells.get(k, "—").replace("|", "\\|") for k in cols) + " |")


if __name__ == "__main__":
    main()
