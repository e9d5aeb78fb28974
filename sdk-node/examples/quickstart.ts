// The README's quick start, type-checked by `npm run typecheck`.
import { connect, type ConsumedRecord } from '@aerostream/sdk';

const client = await connect('aero://127.0.0.1:9091');
await client.createTopic('events', { partitions: 3 });
await client.waitForTopic('events');
const producer = client.producer();
const { partition, offset } = await producer.send({ topic: 'events', key: 'user-42', value: 'hello' });
console.log(`written to ${partition} at ${offset}`);
await producer.close();
const consumer = client.consumer({ group: 'readers', from: 'earliest' });
await consumer.subscribe('events');
for await (const rec of consumer) {
  const r: ConsumedRecord = rec;
  console.log(r.offset, r.value?.toString());
  break;
}
await consumer.close();
await client.close();
