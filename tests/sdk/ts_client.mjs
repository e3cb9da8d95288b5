// What the official TypeScript MCP SDK surfaces for each testbed scenario.
//
// Usage: node ts_client.mjs URL --package sdk|client [--eras legacy,modern] [--timeout SECONDS]
//
//   --package sdk     npm `@modelcontextprotocol/sdk` (v1): the 2025 protocol only (legacy era).
//   --package client  npm `@modelcontextprotocol/client` (v2): legacy, and 2026-07-28 through
//                     `versionNegotiation: {mode: 'auto'}` (server/discover, then stateless).
//
// Same shape and rules as python_client.py: per era, list the tools, then for every scenario a
// fresh client (connect, call the tool one or more times, ping, close), each call bounded by a
// timeout. Prints one JSON document; everything but its `volatile` object must be identical
// direct and through strata (tests/it/sdk_clients.rs compares them).

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

const AUTHORIZATION = 'Bearer strata-sdk-test-token';
// Request headers a proxy adds, rewrites, or (hop-by-hop, RFC 9110 §7.6.1) drops: reported
// under `volatile`, not compared.
const PROXY_HEADERS = [
  'host', 'via', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'forwarded',
  'connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade',
];

const BOTH = ['legacy', 'modern'];
// [scenario, arguments, calls in one session, eras]. The order is the testbed's.
const SCENARIOS = [
  ['ok', undefined, 1, BOTH],
  ['tool_error', undefined, 1, BOTH],
  ['jsonrpc_error', undefined, 1, BOTH],
  ['http_503_then_200', undefined, 2, BOTH],
  ['read_flaky', undefined, 2, BOTH],
  ['write_flaky', undefined, 2, BOTH],
  ['http_429', undefined, 1, BOTH],
  ['http_500_success_body', undefined, 1, BOTH],
  ['input_required', undefined, 1, BOTH],
  ['legacy_result', undefined, 1, BOTH],
  ['content_not_array', undefined, 1, BOTH],
  ['wrong_id', undefined, 1, BOTH],
  ['result_and_error', undefined, 1, BOTH],
  ['bad_jsonrpc_version', undefined, 1, BOTH],
  ['malformed_json', undefined, 1, BOTH],
  ['sse_progress', undefined, 1, BOTH],
  ['sse_closed_early', undefined, 1, BOTH],
  ['sse_final_error', undefined, 1, BOTH],
  ['sse_server_request', undefined, 1, ['legacy']],
  ['sse_drip', { count: 3, interval_ms: 50 }, 1, BOTH],
  ['sse_resumable', undefined, 1, ['legacy']],
  ['sse_reset', undefined, 1, BOTH],
  ['json_reset', undefined, 1, BOTH],
  ['large_result', { bytes: 65536 }, 1, BOTH],
  ['slow', { ms: 100 }, 1, BOTH],
  ['empty_202', undefined, 1, BOTH],
  ['wrong_content_type', undefined, 1, BOTH],
  ['echo_headers', undefined, 1, BOTH],
];
// Calls the TS client never resolves (no response on the stream and no stream-end callback,
// or a 202 to a request), so they end by the request timeout; a short one keeps the run quick.
// Each is still made, and the timeout is what the SDK surfaces.
const HANGS = { wrong_id: 1.5, sse_closed_early: 1.5, sse_reset: 1.5, empty_202: 1.5 };

function parseArgs(argv) {
  const opts = { url: undefined, package: 'client', eras: undefined, timeout: 10 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--package') opts.package = argv[++i];
    else if (a === '--eras') opts.eras = argv[++i];
    else if (a === '--timeout') opts.timeout = Number(argv[++i]);
    else opts.url = a;
  }
  if (!opts.url || !['sdk', 'client'].includes(opts.package)) {
    console.error('usage: node ts_client.mjs URL --package sdk|client [--eras legacy,modern] [--timeout S]');
    process.exit(2);
  }
  opts.eras = (opts.eras ?? (opts.package === 'sdk' ? 'legacy' : 'legacy,modern')).split(',');
  return opts;
}

// Neither package's exports map lists ./package.json: read it from node_modules beside this file.
function installedVersion(name) {
  const file = new URL(`./node_modules/${name}/package.json`, import.meta.url);
  return JSON.parse(readFileSync(file, 'utf8')).version;
}

async function loadSdk(pkg) {
  if (pkg === 'sdk') {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const types = await import('@modelcontextprotocol/sdk/types.js');
    const version = installedVersion('@modelcontextprotocol/sdk');
    return {
      name: '@modelcontextprotocol/sdk',
      version,
      newClient(era) {
        const client = new Client({ name: 'strata-sdk-test', version: '1.0.0' }, { capabilities: { roots: {}, elicitation: {} } });
        return client;
      },
      onRequest(client, method, handler) {
        const schema = { 'roots/list': types.ListRootsRequestSchema, 'elicitation/create': types.ElicitRequestSchema }[method];
        client.setRequestHandler(schema, handler);
      },
      callTool: (client, params, options) => client.callTool(params, undefined, options),
      protocolVersion: (client, transport) => transport.protocolVersion,
      Transport: StreamableHTTPClientTransport,
    };
  }
  const mod = await import('@modelcontextprotocol/client');
  const version = installedVersion('@modelcontextprotocol/client');
  return {
    name: '@modelcontextprotocol/client',
    version,
    newClient(era) {
      return new mod.Client(
        { name: 'strata-sdk-test', version: '1.0.0' },
        { capabilities: { roots: {}, elicitation: {} }, versionNegotiation: { mode: era === 'legacy' ? 'legacy' : 'auto' } },
      );
    },
    onRequest: (client, method, handler) => client.setRequestHandler(method, handler),
    callTool: (client, params, options) => client.callTool(params, options),
    protocolVersion: (client) => client.getNegotiatedProtocolVersion(),
    Transport: mod.StreamableHTTPClientTransport,
  };
}

function normaliser(url) {
  const u = new URL(url);
  return (s) => String(s).split(url).join('<URL>').split(u.host).join('<HOST>');
}

function surfacedError(e, norm) {
  const out = { raised: e?.constructor?.name ?? typeof e };
  if (e && typeof e === 'object') {
    if (e.code !== undefined) out.code = e.code;
    if (e.message !== undefined) out.message = norm(e.message);
    if (e.data !== undefined) out.data = JSON.parse(norm(JSON.stringify(e.data)));
    if (e.status !== undefined) out.status = e.status;
    if (e.cause && typeof e.cause === 'object') out.cause = surfacedError(e.cause, norm);
  } else {
    out.message = norm(String(e));
  }
  return out;
}

function surfacedResult(result) {
  const out = { isError: result.isError ?? false, content: [] };
  for (const block of result.content ?? []) {
    if (typeof block.text === 'string' && block.text.length > 4096) {
      // large_result: its length and digest, not 64 KiB of it.
      const digest = createHash('sha256').update(block.text).digest('hex').slice(0, 16);
      out.content.push({ ...block, text: `<${block.text.length} chars, sha256 ${digest}>` });
    } else {
      out.content.push(block);
    }
  }
  if (!Array.isArray(result.content)) out.content = result.content;
  for (const key of ['structuredContent', 'resultType', '_meta', 'toolResult']) {
    if (key in result) out[key] = result[key];
  }
  return out;
}

function echoedHeaders(result, volatile, sessionId) {
  if (result.isError || !Array.isArray(result.content) || !result.content.length) return;
  const seen = JSON.parse(result.content[0].text);
  const compared = {};
  for (const name of Object.keys(seen).sort()) {
    const value = seen[name];
    if (PROXY_HEADERS.includes(name)) (volatile.echo_headers ??= {})[name] = value;
    else if (name === 'mcp-session-id') compared[name] = value === sessionId ? "<the client's session id>" : `<other: ${value}>`;
    else compared[name] = value;
  }
  result.content[0].text = compared;
}

function withTimeout(promise, seconds, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`harness timeout: ${what} took over ${seconds}s`)), seconds * 1000);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function runScenario(sdk, url, era, [name, args, times], timeout, norm, volatile) {
  const record = { scenario: name, calls: [] };
  const callTimeout = HANGS[name] ?? timeout;
  const client = sdk.newClient(era);
  const callbacks = [];
  const transportErrors = [];
  sdk.onRequest(client, 'roots/list', async () => {
    callbacks.push('roots/list');
    return { roots: [{ uri: 'file:///tmp/strata-sdk', name: 'sdk' }] };
  });
  sdk.onRequest(client, 'elicitation/create', async (request) => {
    callbacks.push(`elicitation: ${request.params.message}`);
    return { action: 'accept', content: {} };
  });
  const transport = new sdk.Transport(new URL(url), { requestInit: { headers: { Authorization: AUTHORIZATION } } });
  client.onerror = (e) => transportErrors.push(surfacedError(e, norm));
  try {
    await withTimeout(client.connect(transport, { timeout: timeout * 1000 }), timeout, 'connect');
    for (let i = 0; i < times; i++) {
      callbacks.length = 0;
      const progress = [];
      const entry = {};
      try {
        const result = await withTimeout(
          sdk.callTool(client, { name, arguments: args }, {
            timeout: callTimeout * 1000,
            onprogress: (p) => progress.push([p.progress, p.total ?? null]),
          }),
          callTimeout + 2,
          name,
        );
        entry.result = surfacedResult(result);
        if (name === 'echo_headers') echoedHeaders(entry.result, (volatile[era] ??= {}), transport.sessionId);
      } catch (e) {
        entry.error = surfacedError(e, norm);
      }
      if (progress.length) entry.progress = progress;
      if (callbacks.length) entry.callbacks = [...callbacks];
      record.calls.push(entry);
    }
    if (era === 'modern') {
      // The v2 client refuses `ping` on a 2026-07-28 connection before sending anything
      // (SdkError METHOD_NOT_SUPPORTED_BY_PROTOCOL_VERSION), so there is nothing to check.
      record.ping_after = 'not sent: the SDK has no ping in 2026-07-28';
    } else {
      try {
        await withTimeout(client.ping({ timeout: timeout * 1000 }), timeout + 1, 'ping');
        record.ping_after = 'ok';
      } catch (e) {
        record.ping_after = surfacedError(e, norm);
      }
    }
  } catch (e) {
    record.session_error = surfacedError(e, norm);
  }
  record.had_session_id = transport.sessionId !== undefined;
  // What onerror reported up to here. Closing aborts whatever is still in flight, such as the
  // fire-and-forget notifications/cancelled of a timed-out call, and whether it was still in
  // flight is a race (a few ms through a proxy decide it), so later reports are not kept.
  const reported = [...transportErrors];
  try {
    await withTimeout(transport.terminateSession?.() ?? Promise.resolve(), timeout, 'terminate');
  } catch (e) {
    record.terminate_error = surfacedError(e, norm);
  }
  await withTimeout(client.close(), timeout, 'close').catch(() => {});
  // onerror reports are asynchronous side channels (e.g. a dropped GET stream): their order and
  // number depend on timing, so they are kept only as a sorted set of distinct messages.
  if (reported.length) {
    record.onerror = [...new Set(reported.map((e) => `${e.raised}: ${e.message}`))].sort();
  }
  return record;
}

async function runEra(sdk, url, era, timeout, norm, volatile) {
  const out = {};
  const client = sdk.newClient(era);
  const transport = new sdk.Transport(new URL(url), { requestInit: { headers: { Authorization: AUTHORIZATION } } });
  await withTimeout(client.connect(transport, { timeout: timeout * 1000 }), timeout, 'connect');
  out.protocol_version = sdk.protocolVersion(client, transport) ?? null;
  out.server_info = client.getServerVersion() ?? null;
  const tools = await withTimeout(client.listTools(undefined, { timeout: timeout * 1000 }), timeout, 'tools/list');
  out.tools = tools.tools.map((t) => t.name).sort();
  await transport.terminateSession?.().catch(() => {});
  await client.close();
  out.scenarios = [];
  for (const sc of SCENARIOS) {
    if (sc[3].includes(era)) out.scenarios.push(await runScenario(sdk, url, era, sc, timeout, norm, volatile));
  }
  return out;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const sdk = await loadSdk(opts.package);
  const norm = normaliser(opts.url);
  const volatile = {};
  const doc = { client: { sdk: 'typescript', package: sdk.name, version: sdk.version }, eras: {} };
  const started = Date.now();
  for (const era of opts.eras) doc.eras[era] = await runEra(sdk, opts.url, era, opts.timeout, norm, volatile);
  volatile.elapsed_s = (Date.now() - started) / 1000;
  doc.volatile = volatile;
  process.stdout.write(JSON.stringify(sortKeys(doc), null, 1) + '\n');
  // Timers of abandoned requests (or a reconnecting GET stream) must not keep node alive.
  process.exit(0);
}

function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  return v;
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
