// The web console (/aerostream/console/) of the real aerostream binary,
// loaded in jsdom with its scripts running against the binary's REST API:
// a topic created with the console's form takes kafkajs's records, which
// the console's record browser then shows, with the group kafkajs
// committed, the cluster and tiering pages, and a delete from the console.
const test = require('node:test');
const assert = require('node:assert');
const { JSDOM } = require('jsdom');
const { Kafka, logLevel } = require('kafkajs');
const { startBroker } = require('./broker');

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';

let broker;

test.before(async () => {
  broker = await startBroker();
});

test.after(async () => {
  const code = await broker.stop();
  assert.strictEqual(code, 0, 'aerostream exits 0 on SIGTERM');
});

async function openConsole() {
  const base = `${broker.http}/aerostream/console/`;
  const dom = await JSDOM.fromURL(base, {
    runScripts: 'dangerously',
    resources: 'usable',
    pretendToBeVisual: true,
    beforeParse(window) {
      window.fetch = (path, init) => fetch(new URL(path, base), init);
      window.confirm = () => true;
    },
  });
  await new Promise((resolve) => dom.window.addEventListener('load', resolve));
  return dom;
}

// Waits (a hang guard, not a speed check) until the page shows `text`.
async function until(dom, text) {
  const main = dom.window.document.getElementById('main');
  const deadline = Date.now() + 20000;
  while (Date.now() < deadline) {
    if (main.textContent.includes(text)) return main.textContent;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`the page never showed ${JSON.stringify(text)}; it shows: ${main.textContent}`);
}

async function go(dom, hash, text) {
  dom.window.location.hash = hash;
  return until(dom, text);
}

test('the console creates a topic, browses what kafkajs wrote, and shows groups, cluster and tiering', async () => {
  const topic = `console-${Date.now()}`;
  const groupId = `${topic}-readers`;
  const dom = await openConsole();
  const doc = dom.window.document;
  await until(dom, 'Agents live');

  await go(dom, '#/topics', 'New topic');
  const form = doc.querySelector('form');
  form.elements.topic.value = topic;
  form.elements.partitions.value = '2';
  form.requestSubmit();
  await until(dom, `Topic ${topic}`);
  assert.strictEqual(dom.window.location.hash, `#/topics/${topic}`);

  const kafka = new Kafka({ brokers: [broker.bootstrap], clientId: 'console-test', logLevel: logLevel.NOTHING });
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({
    topic,
    messages: [0, 1, 2].map((i) => ({ partition: 0, key: `k${i}`, value: `v-${i}`, headers: { h: `x${i}` } })),
  });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let seen = 0;
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${seen}/3 messages`)), 30000);
    consumer.run({
      eachMessage: async () => {
        seen += 1;
        if (seen === 3) { clearTimeout(timer); resolve(); }
      },
    });
  });
  await consumer.disconnect();

  await go(dom, '#/topics', topic);
  const page = await go(dom, `#/topics/${topic}`, 'v-2');
  for (const text of ['v-0', 'v-1', 'k1', 'h: x1', 'high watermark 3', 'retention.ms']) {
    assert.ok(page.includes(text), `the topic page shows ${text}: ${page}`);
  }

  const group = await go(dom, `#/groups/${groupId}`, 'Committed offsets');
  assert.ok(group.includes(topic), group);
  assert.ok(group.includes('Total lag0'), `nothing left to read: ${group}`);
  await go(dom, '#/groups', groupId);

  const overview = await go(dom, '#/', 'Agents live');
  assert.ok(overview.includes('1 / 1'), overview);
  await go(dom, '#/tiering', 'Uploaded segments');

  await go(dom, `#/topics/${topic}`, 'Danger zone');
  const del = [...doc.querySelectorAll('button')].find((b) => b.textContent === 'Delete topic');
  del.click();
  await until(dom, 'New topic');
  const resp = await fetch(`${broker.http}/v1/topics/${topic}`);
  assert.strictEqual(resp.status, 404, 'the console deleted the topic');
  dom.window.close();
});

test('the console lists schema subjects and shows the changes between two versions', async () => {
  const subject = `console-schemas-${Date.now()}-value`;
  const v1 = { type: 'record', name: 'Reading', namespace: `c${Date.now()}`, fields: [{ name: 'sensor', type: 'string' }] };
  const v2 = { ...v1, fields: [...v1.fields, { name: 'celsius', type: 'double', default: 0 }] };
  for (const s of [v1, v2]) {
    const resp = await fetch(`${broker.registry}/subjects/${subject}/versions`, {
      method: 'POST',
      headers: { 'content-type': 'application/vnd.schemaregistry.v1+json' },
      body: JSON.stringify({ schema: JSON.stringify(s) }),
    });
    assert.strictEqual(resp.status, 200, await resp.text());
  }
  const dom = await openConsole();
  // the overview renders first; a page opened before it is drawn would be replaced by it
  await until(dom, 'Agents live');
  const list = await go(dom, '#/schemas', subject);
  assert.ok(list.includes('BACKWARD'), list);
  const page = await go(dom, `#/schemas/${subject}`, 'Changes from version 1 to 2');
  const added = [...dom.window.document.querySelectorAll('.diff .added')].map((d) => d.textContent);
  assert.ok(added.some((l) => l.includes('celsius')), `the diff adds the new field: ${added}`);
  assert.ok(page.includes('Compatibility'), page);
  await go(dom, `#/schemas/${subject}/1/1`, 'Version 1');
  dom.window.close();
});

test('the console lists connectors with their tasks and pauses one', async () => {
  const name = `console-gen-${Date.now()}`;
  const resp = await fetch(`${broker.connect}/connectors`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      name,
      config: { 'connector.class': 'DatagenSource', 'kafka.topic': `demo-${Date.now()}`, 'max.interval': '100' },
    }),
  });
  assert.strictEqual(resp.status, 201, await resp.text());
  const taskState = async () => {
    const st = await (await fetch(`${broker.connect}/connectors/${name}/status`)).json();
    return st.tasks[0] ? st.tasks[0].state : 'none';
  };
  // the worker takes the task up within a second or so
  for (let i = 0; i < 100 && (await taskState()) !== 'RUNNING'; i++) {
    await new Promise((r) => setTimeout(r, 200));
  }
  const dom = await openConsole();
  await until(dom, 'Agents live');
  const list = await go(dom, '#/connectors', 'Tasks running');
  assert.ok(list.includes(name) && list.includes('DatagenSource'), list);
  const detail = await go(dom, `#/connectors/${name}`, 'Restart failed tasks');
  assert.ok(detail.includes('RUNNING') && detail.includes('kafka.topic'), detail);
  const pause = [...dom.window.document.querySelectorAll('button')].find((b) => b.textContent === 'Pause');
  assert.ok(pause, 'a Pause button');
  pause.click();
  // the page is drawn again after the pause; the task reports PAUSED
  for (let i = 0; i < 100 && (await taskState()) !== 'PAUSED'; i++) {
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.strictEqual(await taskState(), 'PAUSED');
  dom.window.location.hash = '#/topics';
  await until(dom, 'Topics');
  const paused = await go(dom, `#/connectors/${name}`, 'Restart failed tasks');
  assert.ok(paused.includes('PAUSED'), paused);
  dom.window.close();
});
