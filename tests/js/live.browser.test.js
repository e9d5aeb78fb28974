// The stream processor's live view page in a real browser: Debian's
// chromium, headless, over puppeteer-core. The real aerostream binary runs a
// broker and `aerostream process` with `live: {listen}`; the page is opened,
// then kafkajs writes events whose 1-second windows close one after the
// other. The page must show the pipeline's name, count every window the
// WebSocket brought, list the newest rows, draw the chart (pixels on the
// canvas), and the browser must report no console error, uncaught page
// error or failed request. A PNG goes to $AEROSTREAM_ARTIFACTS/processor/.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Kafka, logLevel } = require('kafkajs');
const { startBroker, freePort } = require('./broker');
const { startProcess, stopProcess, openPage } = require('./processor');

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';

const ARTIFACTS = path.join(
  process.env.AEROSTREAM_ARTIFACTS || path.join(__dirname, '..', '..', 'artifacts'),
  'processor',
);
const KEYS = 4;
const SECONDS = 12; // windows per key; the newest stays open
const T0 = Date.UTC(2026, 0, 1);

test('the live view charts the windows a running processor closes', async () => {
  const broker = await startBroker();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aerostream-live-'));
  const port = await freePort();
  const topic = `live-${Date.now()}`;
  let proc;
  let browser;
  let finished = false;
  try {
    const kafka = new Kafka({ brokers: [broker.bootstrap], clientId: 'live-browser-test', logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
    await admin.disconnect();
    proc = startProcess(dir, `
name: prices
source: {bootstrap: "${broker.bootstrap}", topic: ${topic}, format: json, event_time: ts, key: sym, idle_timeout: 1m}
window: {type: tumbling, size: 1s}
aggregates: [{op: avg, field: price, as: mean}, {op: count, as: trades}]
sink: {type: parquet, url: "file://${dir}/out"}
live: {listen: "127.0.0.1:${port}"}
`);

    const opened = await openPage();
    browser = opened.browser;
    const { page, problems } = opened;
    // the processor may still be starting: try the page for a while
    const deadline = Date.now() + 60000;
    for (;;) {
      try {
        await page.goto(`http://127.0.0.1:${port}/`, { waitUntil: 'load', timeout: 5000 });
        break;
      } catch (e) {
        assert.ok(Date.now() < deadline, `the live view never answered: ${fs.readFileSync(path.join(dir, 'process.log'), 'utf8')}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    problems.length = 0; // refused connections while it started
    await page.waitForFunction(() => document.getElementById('title').textContent.includes('prices'), { timeout: 20000 });

    const producer = kafka.producer();
    await producer.connect();
    const messages = [];
    for (let s = 0; s < SECONDS; s += 1) {
      for (let k = 0; k < KEYS; k += 1) {
        messages.push({ key: `S${k}`, value: JSON.stringify({ sym: `S${k}`, price: 100 + k + s / 10, ts: T0 + s * 1000 + 10 * k }) });
      }
    }
    await producer.send({ topic, messages });
    await producer.disconnect();

    const closed = KEYS * (SECONDS - 1);
    await page.waitForFunction(
      (n) => document.getElementById('status').textContent.startsWith(`${n} windows received`),
      { timeout: 30000, polling: 100 },
      closed,
    );
    const status = await page.$eval('#status', (e) => e.textContent);
    assert.match(status, /charting mean/);
    const rows = await page.$$eval('#rows tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
    assert.strictEqual(rows.length, 20, 'the newest 20 rows are listed');
    assert.ok(rows.every((r) => /^S[0-3]$/.test(r[0]) && r[4] === '1' && r[5] === 'final'), JSON.stringify(rows.slice(0, 3)));
    const headers = await page.$$eval('#rows thead th', (ths) => ths.map((th) => th.textContent));
    assert.deepStrictEqual(headers, ['key', 'window_start', 'window_end', 'mean', 'trades', 'state']);
    // lines were drawn: some pixels of the canvas are not blank
    const inked = await page.$eval('#chart', (c) => {
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n += 1;
      return n;
    });
    assert.ok(inked > 500, `the chart has ${inked} drawn pixels`);
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: path.join(ARTIFACTS, 'live-view.png') });
    assert.deepStrictEqual(problems, []);
    finished = true;
  } finally {
    if (browser) await browser.close();
    await stopProcess(proc, finished);
    const stopped = await broker.stop();
    if (finished) assert.strictEqual(stopped, 0);
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
