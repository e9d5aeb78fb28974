// AeroStream's Node.js SDK: the native protocol over TCP.
import { Client } from './src/client.js';
import { Producer } from './src/producer.js';
import { Consumer } from './src/consumer.js';

export { Client, parseBootstrap } from './src/client.js';
export { Producer } from './src/producer.js';
export { Consumer } from './src/consumer.js';
export { AeroStreamError, ConnectionError, ErrorCode, errorName, isRetriable, ERROR_CODES } from './src/errors.js';
export { ProtocolError, encodeFrame, decodeFrame, decodeHeader, decodeBody, MESSAGES, OPS, PROTOCOL_VERSION, FRAMING_VERSION } from './src/codec.js';
export { encodeBatch, decodeBatches, crc32c, RecordsError, Compression } from './src/records.js';
export { murmur2, partitionForKey } from './src/partitioner.js';
export { ScramClient } from './src/scram.js';

/** Connects to a bootstrap URL, aero://HOST:PORT[,HOST:PORT…]. */
export function connect(bootstrap, config) {
  return Client.connect(bootstrap, config);
}

Client.prototype.producer = function producer(config) { return new Producer(this, config); };
Client.prototype.consumer = function consumer(config) { return new Consumer(this, config); };
