// The waiting-room page in a real browser (Debian's Chromium driven by
// playwright-core): a visitor enters behind a synthetic crowd, sees their
// position and ETA fall, is admitted and completes an order through the
// protected route. Screenshots land in artifacts/.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const devBin = process.env.QG_DEV_BIN || join(root, "target", "debug", "queuegate-dev");
const artifacts = join(root, "artifacts");
const CHROMIUM = process.env.CHROMIUM_BIN || "/usr/bin/chromium";

// Starts the local stack with a crowd ahead of us; resolves with its URL.
function startStack() {
  const child = spawn(devBin, ["--port", "0", "--crowd", "40", "--crowd-ramp", "1",
    "--leave-share", "0", "--admit-rate", "6", "--exit-after", "150"],
    { stdio: ["ignore", "pipe", "pipe"], detached: true });
  let log = "";
  const url = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("stack did not start:\n" + log)), 90_000);
    child.stdout.on("data", (d) => {
      log += d;
      const m = /open (http:\/\/127\.0\.0\.1:\d+)\/queue/.exec(log);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    child.stderr.on("data", (d) => { log += d; });
    child.on("exit", (code) => reject(new Error(`stack exited with ${code}:\n${log}`)));
  });
  return { child, url, log: () => log };
}

function stop(child) {
  try { process.kill(-child.pid, "SIGTERM"); } catch { /* already gone */ }
}

const number = async (page, sel) => Number((await page.textContent(sel)).replace(/[^0-9]/g, ""));

test("a visitor waits, is admitted and orders through the gate", { timeout: 170_000 }, async () => {
  mkdirSync(artifacts, { recursive: true });
  const stack = startStack();
  let browser;
  try {
    const base = await stack.url;
    // Let the crowd take its tickets first.
    await new Promise((r) => setTimeout(r, 2_000));
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    const page = await browser.newPage();
    await page.goto(base + "/queue");

    // Waiting: a position and an ETA, announced in a live region.
    await page.waitForSelector("#figures:not([hidden])", { timeout: 20_000 });
    const first = await number(page, "#position");
    assert.ok(first > 1, `behind the crowd, got position ${first}`);
    assert.match(await page.textContent("#eta"), /\d+ (s|min)/);
    assert.equal(await page.getAttribute("#status", "aria-live"), "polite");
    assert.ok(await page.getAttribute("#progress", "aria-label"));
    await page.screenshot({ path: join(artifacts, "browser-waiting.png") });

    // The position falls as the scheduler admits the people ahead.
    await page.waitForFunction((p) => {
      const el = document.querySelector("#position");
      return el && Number(el.textContent.replace(/[^0-9]/g, "")) < p;
    }, first, { timeout: 30_000, polling: 200 });
    assert.ok(await number(page, "#progress") >= 0);

    // Admitted: the continue button becomes usable.
    await page.waitForSelector('#continue:not([hidden])[aria-disabled="false"]', { timeout: 60_000 });
    await page.screenshot({ path: join(artifacts, "browser-admitted.png") });
    await page.click("#continue");
    await page.waitForURL(/\/checkout$/);

    // The order goes through the protected route with the token cookie.
    await page.click("#order");
    await page.waitForFunction(() => /Order confirmed/.test(document.querySelector("#result").textContent),
      null, { timeout: 15_000 });
    await page.screenshot({ path: join(artifacts, "browser-ordered.png") });

    // Back on the waiting-room page, the visitor is told the order is done.
    await page.goto(base + "/queue");
    await page.waitForFunction(() => /complete/.test(document.querySelector("#status").textContent),
      null, { timeout: 15_000 });
  } catch (e) {
    throw new Error(`${e.message}\n--- stack log ---\n${stack.log().slice(-4000)}`);
  } finally {
    if (browser) await browser.close();
    stop(stack.child);
  }
});
