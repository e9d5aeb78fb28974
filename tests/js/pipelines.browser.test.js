// The console's Pipelines page in a real browser (Debian's chromium,
// headless, over puppeteer-core): the real aerostream binary runs a broker
// and `aerostream process` with a live view and early results every 200 ms;
// the console, served by the broker, is pointed at the processor's live
// address and reads its WebSocket from the broker's origin. kafkajs writes
// events into one 10-second window per key: the page must list each key's
// window as early with its count so far, then, once an event past the
// window's end closes it, as final with every record counted; the chart is
// drawn, the address is remembered, and the browser reports no console
// error, uncaught page error or failed request. A PNG goes to
// $AEROSTREAM_ARTIFACTS/console/pipelines.png.
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
  'console',
);
const KEYS = 4;
const PER_KEY = 25;
const T0 = Date.UTC(2026, 0, 1); // a window start: a whole number of 10 s

// The table's rows (key, start, end, mean, trades, state): {key: [window
// start, trades, state]}.
function tableRows(page) {
  return page.$$eval('#main tbody tr[data-key]', (trs) => Object.fromEntries(trs.map((tr) => {
    const cells = [...tr.cells].map((c) => c.textContent);
    return [tr.dataset.key, [cells[1], cells[4], cells[cells.length - 1]]];
  })));
}

async function until(page, what, check) {
  const deadline = Date.now() + 30000;
  for (;;) {
    const rows = await tableRows(page);
    if (check(rows)) return rows;
    if (Date.now() > deadline) {
      const main = await page.$eval('#main', (m) => m.textContent);
      assert.fail(`never: ${what}; the page shows: ${main}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

test("the console's Pipelines page shows a processor's early and final windows", async () => {
  const broker = await startBroker();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aerostream-pipelines-'));
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  const topic = `pipelines-${Date.now()}`;
  let proc;
  let browser;
  let finished = false;
  try {
    const kafka = new Kafka({ brokers: [broker.bootstrap], clientId: 'pipelines-browser-test', logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
    await admin.disconnect();
    proc = startProcess(dir, `
name: trades
source: {bootstrap: "${broker.bootstrap}", topic: ${topic}, format: json, event_time: ts, key: sym, idle_timeout: 1m}
window: {type: tumbling, size: 10s, early: 200ms}
aggregates: [{op: avg, field: price, as: mean}, {op: count, as: trades}]
sink: {type: parquet, url: "file://${dir}/out"}
live: {listen: "${address}"}
`);
    // the processor may still be starting: wait for its live view
    const deadline = Date.now() + 60000;
    for (;;) {
      try {
        const resp = await fetch(`http://${address}/recent`);
        if (resp.ok) break;
      } catch (e) { /* not listening yet */ }
      assert.ok(Date.now() < deadline, `the live view never answered: ${fs.readFileSync(path.join(dir, 'process.log'), 'utf8')}`);
      await new Promise((r) => setTimeout(r, 200));
    }

    const opened = await openPage();
    browser = opened.browser;
    const { page, problems } = opened;
    await page.goto(`${broker.http}/aerostream/console/#/pipelines`, { waitUntil: 'load' });
    await page.waitForSelector('input[name=address]');
    await page.type('input[name=address]', address);
    await page.click('#main form button[type=submit]');
    await page.waitForFunction(
      () => document.querySelector('#main h1').textContent.includes('Pipeline trades (tumbling windows, early results every 200 ms)'),
      { timeout: 20000 },
    );
    assert.strictEqual(await page.evaluate(() => location.hash), `#/pipelines/${encodeURIComponent(address)}`);

    const producer = kafka.producer();
    await producer.connect();
    const messages = [];
    for (let i = 0; i < KEYS * PER_KEY; i += 1) {
      const k = i % KEYS;
      messages.push({ key: `S${k}`, value: JSON.stringify({ sym: `S${k}`, price: 100 + k, ts: T0 + i * 10 }) });
    }
    await producer.send({ topic, messages });

    const start = new Date(T0).toISOString().replace('T', ' ').replace('Z', '');
    const all = Array.from({ length: KEYS }, (_, k) => `S${k}`);
    // the window is open: its rows are early, with every record so far
    await until(page, 'every key early with all its records', (rows) =>
      all.every((k) => rows[k] && rows[k][0] === start && rows[k][1] === String(PER_KEY) && rows[k][2] === 'early'));
    assert.ok(await page.$$eval('#main tr.early', (trs) => trs.length) >= KEYS, 'early rows are marked');

    // an event past the window's end closes it
    await producer.send({ topic, messages: [{ key: 'Z', value: JSON.stringify({ sym: 'Z', price: 1, ts: T0 + 30000 }) }] });
    await producer.disconnect();
    const rows = await until(page, 'every key final', (r) =>
      all.every((k) => r[k] && r[k][0] === start && r[k][2] === 'final'));
    assert.deepStrictEqual(all.map((k) => rows[k][1]), all.map(() => String(PER_KEY)));
    await page.waitForFunction(() => document.getElementById('pipeline-status').textContent.includes(': 4 windows closed'), { timeout: 10000 });
    const points = await page.$eval('#main figure.chart', (f) => Number(f.dataset.points));
    assert.ok(points >= KEYS, `the chart has ${points} points`);
    const marks = await page.$$eval('#main figure.chart svg .c0', (e) => e.length);
    assert.ok(marks > 0, "the first key's window is drawn");
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: path.join(ARTIFACTS, 'pipelines.png'), fullPage: true });

    // the address is remembered for the next visit
    await page.goto('about:blank');
    await page.goto(`${broker.http}/aerostream/console/#/pipelines`, { waitUntil: 'load' });
    await page.waitForFunction(() => document.querySelector('#main h1').textContent.startsWith('Pipeline trades'), { timeout: 20000 });
    assert.strictEqual(await page.$eval('input[name=address]', (i) => i.value), address);
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
