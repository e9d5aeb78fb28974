// The web console (/aerostream/console/) of the real aerostream binary in a
// real browser: Debian's chromium, headless, driven over the DevTools
// protocol by puppeteer-core. kafkajs writes records into a two-partition
// topic and a kafkajs consumer group commits offsets; then every page of the
// console (overview with its live charts drawn while kafkajs keeps writing,
// topics, topic detail with the record browser and its offset seek, time
// seek and next page, groups, group detail with its lag chart, tiering with
// its upload charts) is loaded at a
// desktop size (1280x800) and at a phone size (390x844). Each page must show
// what the broker holds, must not scroll sideways at phone size, and the
// browser must report no console error, no uncaught page error and no failed
// or refused request. A PNG of each page at each size is saved to
// $AEROSTREAM_ARTIFACTS/console/ (default: artifacts/console/ at the
// repository root).
//
// The browser is $CHROMIUM, else /usr/bin/chromium; nothing is downloaded.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const puppeteer = require('puppeteer-core');
const { Kafka, logLevel } = require('kafkajs');
const { startBroker } = require('./broker');

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';

const ARTIFACTS = path.join(
  process.env.AEROSTREAM_ARTIFACTS || path.join(__dirname, '..', '..', 'artifacts'),
  'console',
);
const VIEWPORTS = [
  { name: 'desktop', width: 1280, height: 800, phone: false },
  { name: 'phone', width: 390, height: 844, phone: true },
];
// In the topic's partition 0; partition 1 gets PARTITION_1 more.
const RECORDS = 30;
const PARTITION_1 = 4;
// Record i of partition 0 is stamped T0 + i seconds.
const T0 = Date.UTC(2026, 0, 1);

let broker;
let browser;
const topic = `browser-${Date.now()}`;
const groupId = `${topic}-readers`;

async function writeAndConsume() {
  const kafka = new Kafka({ brokers: [broker.bootstrap], clientId: 'console-browser-test', logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }, { topic: `${topic}-live`, numPartitions: 1 }], waitForLeaders: true });
  await admin.disconnect();
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({
    topic,
    messages: [
      ...Array.from({ length: RECORDS }, (_, i) => ({
        partition: 0, key: `k${i}`, value: `v-${i}`, headers: { h: `x${i}` }, timestamp: String(T0 + i * 1000),
      })),
      ...Array.from({ length: PARTITION_1 }, (_, i) => ({ partition: 1, key: null, value: `p1-${i}` })),
    ],
  });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const total = RECORDS + PARTITION_1;
  let seen = 0;
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${seen}/${total} messages`)), 30000);
    consumer.run({
      eachMessage: async () => {
        seen += 1;
        if (seen === total) { clearTimeout(timer); resolve(); }
      },
    });
  });
  // Leaving commits what was read: the group's lag is then 0.
  await consumer.disconnect();
}

test.before(async () => {
  broker = await startBroker();
  await writeAndConsume();
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const args = ['--headless=new', '--disable-gpu', '--disable-dev-shm-usage'];
  if (process.getuid && process.getuid() === 0) args.push('--no-sandbox');
  browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args,
  });
});

test.after(async () => {
  if (browser) await browser.close();
  if (broker) {
    const code = await broker.stop();
    assert.strictEqual(code, 0, 'aerostream exits 0 on SIGTERM');
  }
  console.log(`console screenshots: ${ARTIFACTS}`);
});

// A tab at `viewport` that records everything the browser complains about.
async function openTab(viewport) {
  const page = await browser.newPage();
  await page.setViewport({
    width: viewport.width,
    height: viewport.height,
    isMobile: viewport.phone,
    hasTouch: viewport.phone,
    deviceScaleFactor: 1,
  });
  const problems = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`console error: ${msg.text()} (${JSON.stringify(msg.location())})`);
  });
  page.on('pageerror', (err) => problems.push(`uncaught page error: ${err.message}`));
  page.on('requestfailed', (req) => problems.push(`request failed: ${req.method()} ${req.url()}: ${req.failure()?.errorText}`));
  page.on('response', (resp) => {
    if (resp.status() >= 400) problems.push(`request refused: ${resp.request().method()} ${resp.url()}: ${resp.status()}`);
  });
  return { page, problems };
}

// Waits (a hang guard, not a speed check) until #main shows every one of
// `texts`, then for the network to settle; returns #main's text.
async function until(page, ...texts) {
  try {
    await page.waitForFunction(
      (want) => want.every((t) => document.getElementById('main').textContent.includes(t)),
      { timeout: 20000, polling: 50 },
      texts,
    );
  } catch (e) {
    const shown = await page.$eval('#main', (m) => m.textContent);
    assert.fail(`the page never showed ${JSON.stringify(texts)}; it shows: ${shown}`);
  }
  await page.waitForNetworkIdle({ idleTime: 200, timeout: 20000 });
  return page.$eval('#main', (m) => m.textContent);
}

// Checks the page as laid out and saves its screenshot.
async function check(page, problems, viewport, name) {
  // A phone shrinks a page wider than the screen to fit, so the window
  // (innerWidth) grows with the page: compare with the screen's width too.
  const layout = await page.evaluate(() => ({
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
  }));
  const width = Math.min(layout.innerWidth, viewport.width);
  assert.ok(
    layout.scrollWidth <= width,
    `${name} at ${viewport.name} size is ${layout.scrollWidth}px wide on a ${viewport.width}px screen `
      + `(window ${layout.innerWidth}px): it scrolls sideways`,
  );
  const file = path.join(ARTIFACTS, `${viewport.name}-${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  assert.ok(fs.statSync(file).size > 0, file);
  assert.deepStrictEqual(problems, [], `the browser complained on ${name} at ${viewport.name} size`);
}

// The chart titled `title`: how many points it draws, its lines and legend.
function chart(page, title) {
  return page.$$eval('#main figure.chart', (figs, t) => {
    const f = figs.find((x) => x.querySelector('figcaption').textContent === t);
    if (!f) return null;
    return {
      points: Number(f.dataset.points),
      lines: f.querySelectorAll('path.series').length,
      legend: f.querySelector('.legend').textContent,
    };
  }, title);
}

// Waits (a hang guard) until the chart titled `title` satisfies `ok`.
async function untilChart(page, title, ok, what) {
  let last = null;
  for (let i = 0; i < 200; i++) {
    last = await chart(page, title);
    if (last && ok(last)) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  return assert.fail(`the ${title} chart never showed ${what}: ${JSON.stringify(last)}`);
}

async function go(page, hash, ...texts) {
  await page.evaluate((h) => { location.hash = h; }, hash);
  return until(page, ...texts);
}

// The record table's offsets, in order.
function shownOffsets(page) {
  return page.$$eval('#main table', (tables) => {
    const records = tables.find((t) => t.querySelector('th')?.textContent === 'Offset');
    return [...records.querySelectorAll('tbody tr')].map((tr) => tr.firstChild.textContent);
  });
}

for (const viewport of VIEWPORTS) {
  test(`every console page at ${viewport.name} size (${viewport.width}x${viewport.height})`, async () => {
    const { page, problems } = await openTab(viewport);
    await page.goto(`${broker.http}/aerostream/console/`, { waitUntil: 'load' });

    const overview = await until(page, 'Agents live', 'Partitions', 'Storage by tier', topic);
    assert.ok(overview.includes('1 / 1'), `one live agent: ${overview}`);
    assert.ok(overview.includes('this agent'), overview);
    // Live charts: kafkajs writes while the overview samples the agent.
    const kafka = new Kafka({ brokers: [broker.bootstrap], clientId: 'console-live', logLevel: logLevel.NOTHING });
    const producer = kafka.producer();
    await producer.connect();
    let writing = true;
    const writes = (async () => {
      while (writing) {
        await producer.send({ topic: `${topic}-live`, messages: [{ value: 'x'.repeat(2000) }] });
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    try {
      const throughput = await untilChart(page, 'Throughput',
        (c) => c.points >= 4 && /^in [1-9]/.test(c.legend), 'records coming in');
      assert.strictEqual(throughput.lines, 2, 'a line in and a line out');
      const latency = await untilChart(page, 'Produce latency', (c) => /p99 \d/.test(c.legend), 'a p99');
      assert.strictEqual(latency.lines, 2, 'p50 and p99 lines');
    } finally {
      writing = false;
      await writes;
      await producer.disconnect();
    }
    await until(page, `${topic}-live`);
    await check(page, problems, viewport, 'overview');

    const topics = await go(page, '#/topics', topic, 'New topic');
    assert.ok(topics.includes('Create topic'), topics);
    await check(page, problems, viewport, 'topics');

    // The topic page opens on partition 0 from the log start, 20 records.
    const detail = await go(page, `#/topics/${topic}`, `high watermark ${RECORDS}`, 'v-19', 'retention.ms');
    for (const text of ['v-0', 'k1', 'h: x1', 'next offset 20', 'Next page', 'Danger zone', 'Local bytes', 'Tiered bytes']) {
      assert.ok(detail.includes(text), `the topic page shows ${text}: ${detail}`);
    }
    assert.ok(!detail.includes('v-20'), 'one page holds 20 records');
    assert.deepStrictEqual(await shownOffsets(page), Array.from({ length: 20 }, (_, i) => String(i)));
    await check(page, problems, viewport, 'topic');

    // Seek: partition 0 from offset 12, five records.
    const form = (await page.$$('#main form'))[0];
    await form.$eval('input[name=offset]', (i) => { i.value = '12'; });
    await form.$eval('input[name=limit]', (i) => { i.value = '5'; });
    await form.$eval('button[type=submit]', (b) => b.click());
    await until(page, 'next offset 17');
    assert.deepStrictEqual(await shownOffsets(page), ['12', '13', '14', '15', '16']);
    await check(page, problems, viewport, 'topic-seek');
    await page.$$eval('#main button', (bs) => bs.find((b) => b.textContent === 'Next page').click());
    await until(page, 'next offset 22');
    assert.deepStrictEqual(await shownOffsets(page), ['17', '18', '19', '20', '21']);
    // Seek by time: record i is stamped T0 + i s, so 00:00:07.5 starts at 8.
    await form.$eval('input[name=timestamp]', (i) => { i.value = '2026-01-01T00:00:07.500Z'; });
    await form.$eval('input[name=limit]', (i) => { i.value = '3'; });
    await form.$eval('button[type=submit]', (b) => b.click());
    await until(page, 'next offset 11');
    assert.deepStrictEqual(await shownOffsets(page), ['8', '9', '10']);
    await check(page, problems, viewport, 'topic-time-seek');
    await form.$eval('input[name=timestamp]', (i) => { i.value = ''; });
    await form.$eval('input[name=limit]', (i) => { i.value = '20'; });
    // Partition 1 holds the keyless records.
    await form.$eval('input[name=partition]', (i) => { i.value = '1'; });
    await form.$eval('input[name=offset]', (i) => { i.value = ''; });
    await form.$eval('button[type=submit]', (b) => b.click());
    const p1 = await until(page, `high watermark ${PARTITION_1}`, 'p1-3');
    assert.ok(p1.includes('null'), `a keyless record shows a null key: ${p1}`);
    await check(page, problems, viewport, 'topic-partition-1');

    // Every member left: the group is empty, its offsets stay.
    const groups = await go(page, '#/groups', groupId);
    assert.ok(groups.includes(`${groupId}Empty`), `the group's state: ${groups}`);
    await check(page, problems, viewport, 'groups');

    const group = await go(page, `#/groups/${groupId}`, 'Committed offsets', topic);
    assert.ok(group.includes('Total lag0'), `kafkajs committed everything: ${group}`);
    const committed = await page.$$eval('#main table', (tables) => {
      const t = tables.find((x) => x.querySelector('th')?.textContent === 'Topic');
      return [...t.querySelectorAll('tbody tr')].map((tr) => [...tr.children].slice(1, 4).map((td) => td.textContent));
    });
    assert.deepStrictEqual(
      committed.sort(),
      [['0', String(RECORDS), String(RECORDS)], ['1', String(PARTITION_1), String(PARTITION_1)]],
      'partition, committed offset and high watermark of each partition',
    );
    const lag = await untilChart(page, 'Lag over time', (c) => c.points >= 2, 'two samples');
    assert.ok(lag.legend.includes('total 0'), `no lag left: ${lag.legend}`);
    assert.ok(lag.legend.includes(`${topic}/0 0`), lag.legend);
    await check(page, problems, viewport, 'group');

    const tiering = await go(page, '#/tiering', 'Uploaded segments');
    await untilChart(page, 'Upload lag', (c) => c.points >= 2, 'two samples');
    await untilChart(page, 'Waiting for upload', (c) => c.points >= 2, 'two samples');
    for (const text of ['Upload lag', 'Objects written', 'Objects deleted', 'Local disk', 'Cache hit ratio']) {
      assert.ok(tiering.includes(text), `the tiering page shows ${text}: ${tiering}`);
    }
    await check(page, problems, viewport, 'tiering');
    await page.close();
  });
}

// A page still loading when the reader moves on must not draw over the
// page they moved to: the topic list's answer is held back until the
// groups page is shown, then let through.
test('a slow page does not draw over the page opened after it', async () => {
  const { page, problems } = await openTab(VIEWPORTS[0]);
  await page.goto(`${broker.http}/aerostream/console/`, { waitUntil: 'load' });
  await until(page, 'Agents live');
  await page.setRequestInterception(true);
  let release;
  const held = new Promise((r) => { release = r; });
  let heldOne = false;
  page.on('request', async (req) => {
    if (!heldOne && new URL(req.url()).pathname.endsWith('/v1/topics')) {
      heldOne = true;
      await held;
    }
    req.continue();
  });
  await page.evaluate(() => { location.hash = '#/topics'; });
  await page.waitForFunction(() => location.hash === '#/topics');
  await page.evaluate(() => { location.hash = '#/groups'; });
  await page.waitForFunction(
    (want) => want.every((t) => document.getElementById('main').textContent.includes(t)),
    { timeout: 20000, polling: 50 },
    ['Consumer groups', groupId],
  );
  assert.ok(heldOne, 'the topic list was asked for and held');
  const answered = page.waitForResponse((r) => new URL(r.url()).pathname.endsWith('/v1/topics'), { timeout: 20000 });
  release();
  // the held answer arrives and its page (topics) finishes loading
  await answered;
  await page.waitForNetworkIdle({ idleTime: 500, timeout: 20000 });
  const shown = await page.$eval('#main', (m) => m.textContent);
  assert.ok(shown.includes('Consumer groups') && !shown.includes('New topic'),
    `the groups page stays after the topic list arrives: ${shown}`);
  assert.deepStrictEqual(problems, []);
  await page.close();
});
