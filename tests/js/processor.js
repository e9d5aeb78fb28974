// What the processor's browser tests share: `aerostream process` started on
// a pipeline file and stopped with SIGTERM, and a headless chromium page
// that records console errors, uncaught page errors and failed requests.
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const puppeteer = require('puppeteer-core');
const { binary } = require('./broker');

// Writes `yaml` as dir/p.yaml and runs `aerostream process` on it, its
// log in dir/process.log.
function startProcess(dir, yaml) {
  fs.writeFileSync(path.join(dir, 'p.yaml'), yaml);
  const log = fs.openSync(path.join(dir, 'process.log'), 'a');
  return spawn(binary(), ['process', '--pipeline', path.join(dir, 'p.yaml')], { stdio: ['ignore', log, log] });
}

// SIGTERM, then its exit status must be 0 when the test got to its end
// (after a failure it may not have been up yet: the failure is the news).
async function stopProcess(proc, finished) {
  if (!proc) return;
  const code = await new Promise((resolve) => {
    if (proc.exitCode !== null) return resolve(proc.exitCode);
    proc.on('exit', (c) => resolve(c));
    proc.kill('SIGTERM');
  });
  if (finished) assert.strictEqual(code, 0, 'aerostream process exits 0 on SIGTERM');
}

// Debian's chromium, headless; a 1280x800 page and the problems it reports.
async function openPage() {
  const args = ['--headless=new', '--disable-gpu', '--disable-dev-shm-usage'];
  if (process.getuid && process.getuid() === 0) args.push('--no-sandbox');
  const browser = await puppeteer.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, args });
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800, deviceScaleFactor: 1 });
  const problems = [];
  page.on('console', (msg) => { if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`); });
  page.on('pageerror', (err) => problems.push(`uncaught page error: ${err.message}`));
  page.on('requestfailed', (req) => problems.push(`request failed: ${req.url()}: ${req.failure()?.errorText}`));
  return { browser, page, problems };
}

module.exports = { startProcess, stopProcess, openPage };
