// The inspector's page in a real browser: Debian's headless Chromium, driven by puppeteer-core,
// against a running strata whose calls are already made (tests/it/inspector_page.rs sets that
// up and runs this file).
//
//   STRATA_ADMIN=127.0.0.1:9464 node tests/browser/page.test.mjs
//
// Environment:
//   STRATA_ADMIN        strata's admin address (host:port or http://host:port); required
//   STRATA_TOKEN        the admin bearer token, when the admin port needs one (given to the page
//                       as #token=…)
//   STRATA_LISTEN       strata's agent address; when set, the test makes calls of its own after
//                       the page has loaded, to see them arrive over the live stream
//   STRATA_EXPECT_TOOLS JSON array of tool names that must each have a row
//   STRATA_EXPECT_STUCK a tool whose call is in flight while the test runs (the Stuck view)
//   STRATA_XSS_TOOL     the hostile tool name that was called (default `<img src=x onerror=alert(1)>`)
//   STRATA_SCREENSHOT   where the screenshot goes (default target/artifacts/inspector.png)
//   CHROMIUM            the browser (default /usr/bin/chromium)
//
// Every wait is bounded (WAIT_MS); the process exits non-zero when any test fails.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import puppeteer from "puppeteer-core";

const WAIT_MS = 15_000;
/** The whole run; past it the browser is closed and the process fails (so no Chromium outlives it). */
const OVERALL_MS = 150_000;
const ROWS_MAX = 200;
const XSS = process.env.STRATA_XSS_TOOL || "<img src=x onerror=alert(1)>";
const MODERN_VERSION = "2026-07-28";

const admin = baseUrl(required("STRATA_ADMIN"));
const token = process.env.STRATA_TOKEN || "";
const listen = process.env.STRATA_LISTEN ? baseUrl(process.env.STRATA_LISTEN) : null;
const expectTools = JSON.parse(process.env.STRATA_EXPECT_TOOLS || "[]");
const expectStuck = process.env.STRATA_EXPECT_STUCK || "";
const screenshot = resolve(process.env.STRATA_SCREENSHOT || "target/artifacts/inspector.png");

/** What the page did that it must not: dialogs, script errors, console errors, foreign requests. */
const incidents = { dialogs: [], errors: [], foreign: [] };
let browser, page;

function required(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`page.test.mjs: ${name} is not set (see the header of this file)`);
    process.exit(2);
  }
  return value;
}

function baseUrl(address) {
  const url = new URL(address.includes("://") ? address : `http://${address}`);
  url.pathname = "/";
  return url;
}

async function adminGet(path) {
  const res = await fetch(new URL(path, admin), {
    headers: token ? { Authorization: `Bearer ${token}` } : {},
  });
  assert.equal(res.status, 200, `GET ${path} answered ${res.status}`);
  return res;
}

/** Every `strata_calls_total` series of /metrics: [{labels, value}]. */
async function callsTotal() {
  const text = await (await adminGet("metrics")).text();
  const series = [];
  for (const line of text.split("\n")) {
    const m = /^strata_calls_total\{(.*)\}\s+(\S+)$/.exec(line);
    if (m) series.push({ labels: parseLabels(m[1]), value: Number(m[2]) });
  }
  return series;
}

/** `a="x",b="y\"z"` → {a: "x", b: "y\"z"} (text format label escapes). */
function parseLabels(text) {
  const labels = {};
  const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
  for (let m; (m = re.exec(text)); ) {
    labels[m[1]] = m[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
  }
  return labels;
}

/** Totals by one label, leaving out those at zero (series may be there before any call). */
function sumBy(series, label) {
  const out = {};
  for (const { labels, value } of series) {
    if (value > 0) out[labels[label]] = (out[labels[label]] || 0) + value;
  }
  return out;
}

/** The visible rows, as the page shows them. */
function rows() {
  return page.$$eval('#calls-body tr[data-testid="call-row"]:not([hidden])', (trs) =>
    trs.map((tr) => {
      const cell = (col) => tr.querySelector(`td[data-col="${col}"]`).textContent;
      return {
        seq: Number(tr.dataset.seq),
        outcome: tr.dataset.outcome,
        layer: tr.dataset.layer,
        method: cell("method"),
        tool: cell("tool"),
        outcomeText: cell("outcome"),
      };
    }),
  );
}

function visibleRowCount() {
  return page.$$eval('#calls-body tr[data-testid="call-row"]:not([hidden])', (t) => t.length);
}

function waitRows(predicate, arg) {
  return page.waitForFunction(predicate, { timeout: WAIT_MS, polling: 100 }, arg);
}

/** One stateless 2026-07-28 tools/call through strata; resolves with the HTTP status. */
async function callTool(name, id) {
  const meta = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": { name: "inspector-page-test", version: "1" },
  };
  const res = await fetch(new URL("mcp", listen), {
    method: "POST",
    headers: {
      Accept: "application/json, text/event-stream",
      "Content-Type": "application/json",
      "MCP-Protocol-Version": MODERN_VERSION,
      "Mcp-Method": "tools/call",
      "Mcp-Name": name,
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id,
      method: "tools/call",
      params: { name, arguments: {}, _meta: meta },
    }),
    signal: AbortSignal.timeout(WAIT_MS),
  });
  await res.arrayBuffer();
  return res.status;
}

/** Clears the filters and waits until all `total` rows are back. */
async function clearFilters(total) {
  await page.click("#f-clear");
  await waitRows((n) => document.querySelectorAll("#calls-body tr:not([hidden])").length === n, total);
}

setTimeout(async () => {
  console.error(`page.test.mjs: not finished within ${OVERALL_MS} ms`);
  await browser?.close().catch(() => {});
  process.exit(1);
}, OVERALL_MS).unref();

before(async () => {
  browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--headless=new", "--disable-gpu", "--disable-dev-shm-usage"],
    defaultViewport: { width: 1440, height: 900 },
    timeout: WAIT_MS,
  });
  page = await browser.newPage();
  page.on("dialog", async (d) => {
    incidents.dialogs.push(`${d.type()}: ${d.message()}`);
    await d.dismiss();
  });
  page.on("pageerror", (e) => incidents.errors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") incidents.errors.push(`console: ${m.text()}`);
  });
  page.on("request", (r) => {
    const url = new URL(r.url());
    if (url.protocol !== "data:" && url.origin !== admin.origin) incidents.foreign.push(r.url());
  });
  // Anything that tries to open a dialog is recorded even if the browser would not show it.
  await page.evaluateOnNewDocument(() => {
    window.__dialogs = [];
    for (const name of ["alert", "confirm", "prompt"]) {
      window[name] = (...args) => window.__dialogs.push(`${name}: ${String(args[0])}`);
    }
  });
  const url = new URL(admin);
  if (token) url.hash = `token=${encodeURIComponent(token)}`;
  const res = await page.goto(url.href, { waitUntil: "domcontentloaded", timeout: WAIT_MS });
  assert.equal(res.status(), 200, "GET / on the admin port");
  await page.waitForFunction(() => document.body.dataset.history === "loaded", { timeout: WAIT_MS });
});

after(async () => {
  await browser?.close();
});

test("the table holds a row per call, with the outcomes /metrics counts", async () => {
  const series = await callsTotal();
  const byOutcome = sumBy(series, "outcome");
  const total = Object.values(byOutcome).reduce((a, b) => a + b, 0);
  assert.ok(total > 0, "strata counted no calls");
  assert.ok(total <= ROWS_MAX, `${total} calls do not fit the ${ROWS_MAX} rows the page shows`);
  await waitRows((n) => document.querySelectorAll("#calls-body tr:not([hidden])").length === n, total).catch(
    async () => assert.fail(`expected ${total} rows, the page shows ${await visibleRowCount()}`),
  );

  const shown = await rows();
  const rowsByOutcome = {};
  for (const r of shown) rowsByOutcome[r.outcome] = (rowsByOutcome[r.outcome] || 0) + 1;
  assert.deepEqual(rowsByOutcome, byOutcome, "rows by outcome vs strata_calls_total by outcome");
  for (const r of shown) assert.equal(r.outcomeText, r.outcome, `row ${r.seq} shows its outcome`);
  const seqs = shown.map((r) => r.seq);
  assert.deepEqual(seqs, [...seqs].sort((a, b) => b - a), "newest first");
  for (const tool of expectTools) {
    assert.ok(shown.some((r) => r.method === "tools/call" && r.tool === tool), `a row for tool ${tool}`);
  }

  // The tiles read /calls/counts (polled); they settle on the same numbers.
  await page
    .waitForFunction(
      (expected) =>
        Object.entries(expected).every(
          ([o, n]) => document.getElementById(`tile-outcome-${o}`)?.dataset.count === String(n),
        ),
      { timeout: WAIT_MS, polling: 200 },
      byOutcome,
    )
    .catch(() => assert.fail("outcome tiles never matched strata_calls_total"));
  const byLayer = sumBy(series, "layer");
  for (const [layer, n] of Object.entries(byLayer)) {
    const count = await page.$eval(`#tile-layer-${layer}`, (t) => t.dataset.count);
    assert.equal(count, String(n), `tile of layer ${layer}`);
  }
});

test("a call made after load arrives over the live stream", { skip: !listen && "STRATA_LISTEN not set" }, async () => {
  const before = await rows();
  const top = before[0].seq;
  assert.equal(await callTool("ok", 9001), 200);
  await waitRows(
    (top) => {
      const first = document.querySelector("#calls-body tr:not([hidden])");
      return first && Number(first.dataset.seq) > top && first.querySelector('td[data-col="tool"]').textContent === "ok";
    },
    top,
  ).catch(() => assert.fail("the new call never reached the table"));
  assert.equal(await visibleRowCount(), before.length + 1);
});

test("a filter narrows the rows", async () => {
  const byOutcome = sumBy(await callsTotal(), "outcome");
  const total = await visibleRowCount();
  const [outcome, n] = Object.entries(byOutcome).sort((a, b) => a[1] - b[1])[0];
  assert.ok(n < total, "the rarest outcome is not every call");

  await page.select("#f-outcome", outcome);
  await waitRows((n) => document.querySelectorAll("#calls-body tr:not([hidden])").length === n, n);
  for (const r of await rows()) assert.equal(r.outcome, outcome);
  await clearFilters(total);

  const tool = expectTools[0] || (await rows()).find((r) => r.tool)?.tool;
  assert.ok(tool, "some row has a tool");
  await page.type("#f-tool", tool);
  await waitRows(
    (total) => {
      const n = document.querySelectorAll("#calls-body tr:not([hidden])").length;
      return n > 0 && n < total;
    },
    total,
  );
  for (const r of await rows()) assert.ok(r.tool.toLowerCase().includes(tool.toLowerCase()), r.tool);
  assert.match(await page.$eval("#shown", (e) => e.textContent), /^\d+ of \d+ calls/);
  await clearFilters(total);
});

test("a click on a row opens its whole record", async () => {
  const target = (await rows()).find((r) => r.tool === (expectTools[1] || expectTools[0])) || (await rows())[0];
  await page.click(`#calls-body tr[data-seq="${target.seq}"]`);
  await page.waitForSelector("#detail:not([hidden])", { timeout: WAIT_MS });
  const shown = await page.$$eval("#detail-fields dd", (dds) => dds.map((d) => [d.dataset.field, d.textContent]));

  const history = await (await adminGet("calls?limit=2000")).json();
  const record = history.find((r) => r.seq === target.seq);
  assert.ok(record, `seq ${target.seq} is in GET /calls`);
  const expected = Object.entries(record).map(([k, v]) => [k, typeof v === "object" && v !== null ? JSON.stringify(v) : String(v)]);
  assert.deepEqual(shown, expected, "every field of the record, in order, as text");
  for (const field of ["outcome", "layer", "method", "time", "jsonrpc_id", "duration_ms", "http_statuses"]) {
    assert.ok(shown.some(([k]) => k === field), `detail shows ${field}`);
  }
  assert.deepEqual(JSON.parse(await page.$eval("#detail-json", (e) => e.textContent)), record);
  assert.equal(await page.$eval(`#calls-body tr[data-seq="${target.seq}"]`, (tr) => tr.getAttribute("aria-selected")), "true");

  await page.click("#detail-close");
  await page.waitForSelector("#detail[hidden]", { timeout: WAIT_MS });
});

test("a hostile tool name renders as text and nothing runs", async () => {
  assert.equal(await page.$$eval("#calls img, #detail img", (imgs) => imgs.length), 0, "no <img> in the table");
  assert.deepEqual(await page.evaluate(() => window.__dialogs), [], "no dialog call");
  const hostile = (await rows()).find((r) => r.tool === XSS);
  assert.ok(hostile, `a row whose tool cell reads ${XSS}`);
  const html = await page.$eval(`#calls-body tr[data-seq="${hostile.seq}"] td[data-col="tool"]`, (td) => td.innerHTML);
  assert.equal(html, XSS.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"));

  await page.click(`#calls-body tr[data-seq="${hostile.seq}"]`);
  await page.waitForSelector("#detail:not([hidden])", { timeout: WAIT_MS });
  assert.equal(await page.$eval('#detail-fields dd[data-field="tool"]', (d) => d.textContent), XSS);
  assert.ok((await page.$eval("#detail-title", (e) => e.textContent)).includes(XSS));
  assert.equal(await page.$$eval("img", (imgs) => imgs.length), 0, "no <img> anywhere on the page");
  await page.click("#detail-close");

  // An <img src=x> that had been created would have failed to load and run its handler by now;
  // a round trip to the page makes sure its events had their turn.
  await page.evaluate(() => new Promise((done) => setTimeout(done, 200)));
  assert.deepEqual(await page.evaluate(() => window.__dialogs), [], "no dialog call");
  assert.deepEqual(incidents.dialogs, [], "no dialog shown");
});

test("the Stuck view lists calls in flight", async () => {
  await page.click("#tab-stuck");
  await page.waitForSelector("#view-stuck:not([hidden])[data-loaded]", { timeout: WAIT_MS });
  if (expectStuck) {
    await page
      .waitForFunction(
        (tool) =>
          [...document.querySelectorAll('#stuck-body tr[data-testid="stuck-row"]')].some(
            (tr) => tr.querySelector('td[data-col="tool"]').textContent === tool && tr.dataset.state !== "",
          ),
        { timeout: WAIT_MS, polling: 200 },
        expectStuck,
      )
      .catch(() => assert.fail(`no in-flight row for ${expectStuck}`));
    const live = await (await adminGet("calls/inflight")).json();
    assert.ok(live.some((c) => c.tool === expectStuck), "GET /calls/inflight agrees");
    assert.notEqual(await page.$eval("#stuck-badge", (b) => b.textContent), "0");
  } else {
    const [rowsShown, emptyShown] = await page.evaluate(() => [
      document.querySelectorAll("#stuck-body tr").length,
      !document.getElementById("stuck-empty").hidden,
    ]);
    assert.ok(rowsShown > 0 !== emptyShown, "either rows or the empty note");
  }
  await page.click("#tab-calls");
  await page.waitForSelector("#view-calls:not([hidden])", { timeout: WAIT_MS });
});

test("Pause freezes the table while calls keep arriving", { skip: !listen && "STRATA_LISTEN not set" }, async () => {
  const top = (await rows())[0].seq;
  await page.click("#pause");
  assert.equal(await page.$eval("#pause", (b) => b.getAttribute("aria-pressed")), "true");
  assert.equal(await callTool("ok", 9002), 200);
  await page
    .waitForFunction(() => /paused, 1 new/.test(document.getElementById("shown").textContent), {
      timeout: WAIT_MS,
      polling: 100,
    })
    .catch(() => assert.fail("the paused page never counted the new call"));
  assert.equal((await rows())[0].seq, top, "the table did not move while paused");

  await page.click("#pause");
  await waitRows((top) => Number(document.querySelector("#calls-body tr:not([hidden])").dataset.seq) > top, top);
});

test("the page stays within its own origin and raises no errors; screenshot", async () => {
  assert.deepEqual(incidents.foreign, [], "requests outside the admin origin");
  assert.deepEqual(incidents.errors, [], "script or console errors (a CSP violation is one)");
  assert.equal(await page.$eval("#status", (s) => s.dataset.state), "live");
  mkdirSync(dirname(screenshot), { recursive: true });
  await page.screenshot({ path: screenshot, fullPage: false });
  console.log(`screenshot: ${screenshot}`);
});
