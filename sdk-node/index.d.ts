// Type declarations of @aerostream/sdk, AeroStream's Node.js SDK (native
// protocol version 1 over TCP).

/// <reference types="node" />

export type Bytes = Buffer | Uint8Array;

/** SASL login: PLAIN travels in the hello; SCRAM never sends the password. */
export interface SaslConfig {
  mechanism: 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512';
  user: string;
  password: string;
}

export interface ClientConfig {
  /** Name the servers log for this client. Default "aerostream-node". */
  clientId?: string;
  sasl?: SaslConfig;
  /** Timeout of each request, ms. Default 30000. */
  requestTimeoutMs?: number;
  /** Timeout of connecting and logging in, ms. Default 10000. */
  connectTimeoutMs?: number;
}

export interface PartitionInfo { index: number; leader: number; }

export interface CreateTopicOptions {
  /** -1: the server's default. */
  partitions?: number;
  /** -1: the server's default. */
  replicationFactor?: number;
  /** Kafka topic configs, e.g. {"retention.ms": "86400000"}. */
  configs?: Record<string, string | number>;
}

export interface OffsetToCommit { topic: string; partition: number; offset: bigint | number; metadata?: string; }

/** Connects to aero://HOST:PORT[,HOST:PORT…] (TCP only: aero+quic:// is refused). */
export function connect(bootstrap: string, config?: ClientConfig): Promise<Client>;

export function parseBootstrap(url: string): { host: string; port: number }[];

export class Client {
  static connect(bootstrap: string, config?: ClientConfig): Promise<Client>;
  createTopic(name: string, options?: CreateTopicOptions): Promise<void>;
  deleteTopic(name: string): Promise<void>;
  listTopics(): Promise<string[]>;
  /** Waits until every partition of the topic has a leader. */
  waitForTopic(topic: string, timeoutMs?: number): Promise<PartitionInfo[]>;
  partitions(topic: string, options?: { refresh?: boolean }): Promise<PartitionInfo[]>;
  /** Offsets by partition: 'earliest', 'latest', or the first at or after a timestamp (ms). */
  listOffsets(topic: string, partitions: number[], spec: 'earliest' | 'latest' | number): Promise<Map<number, bigint>>;
  /** Commits offsets outside membership (or as a member with generation and memberId). */
  commitOffsets(group: string, offsets: OffsetToCommit[], member?: { generation?: number; memberId?: string }): Promise<void>;
  /** Committed offsets keyed "topic:partition" (-1n: none). */
  fetchOffsets(group: string, partitions: { topic: string; partition: number }[]): Promise<Map<string, bigint>>;
  /** Round trip to a server, ms. */
  ping(): Promise<number>;
  producer(config?: ProducerConfig): Producer;
  consumer(config?: ConsumerConfig): Consumer;
  close(): Promise<void>;
}

export interface ProducerConfig {
  /** 0, 1 or -1 (all in-sync replicas). Default -1. */
  acks?: 0 | 1 | -1;
  /** How long a batch waits for more records, ms. Default 5. */
  lingerMs?: number;
  /** Bytes of records per batch. Default 131072. */
  batchBytes?: number;
  /** Bytes of records buffered before send() waits for room. Default 33554432. */
  bufferBytes?: number;
  /** 'none' or 'gzip'. Default 'none'. */
  compression?: 'none' | 'gzip';
  /** Default true with acks -1. */
  idempotent?: boolean;
  requestTimeoutMs?: number;
  /** How long a record may be retried before it fails, ms. Default 120000. */
  deliveryTimeoutMs?: number;
  /** Makes a transactional producer. */
  transactionalId?: string;
  transactionTimeoutMs?: number;
}

export interface ProducerRecord {
  topic: string;
  key?: Bytes | string | null;
  value?: Bytes | string | null;
  headers?: Record<string, Bytes | string | null> | [string, Bytes | string | null][];
  /** A partition of your own choice; otherwise murmur2 of the key, or sticky for keyless records. */
  partition?: number;
  /** ms since the Unix epoch; default: when send() was called. */
  timestamp?: number;
}

export interface RecordMetadata { topic: string; partition: number; offset: bigint; }

export class Producer {
  constructor(client: Client, config?: ProducerConfig);
  /** Resolves once the record is acknowledged (offset -1n with acks 0). */
  send(record: ProducerRecord): Promise<RecordMetadata>;
  readonly bufferFull: boolean;
  waitForRoom(): Promise<void>;
  flush(): Promise<void>;
  close(): Promise<void>;
  initTransactions(): Promise<void>;
  beginTransaction(): Promise<void>;
  sendOffsetsToTransaction(offsets: { topic: string; partition: number; offset: bigint | number }[],
    group: string | GroupMetadata): Promise<void>;
  commitTransaction(): Promise<void>;
  abortTransaction(): Promise<void>;
}

export interface ConsumerConfig {
  /** A consumer group id, for subscribe() and commits. */
  group?: string;
  /** Where partitions without a committed offset start. Default 'latest'. */
  from?: 'earliest' | 'latest';
  isolation?: 'read_uncommitted' | 'read_committed';
  maxWaitMs?: number;
  minBytes?: number;
  maxBytes?: number;
  partitionMaxBytes?: number;
  sessionTimeoutMs?: number;
  rebalanceTimeoutMs?: number;
  /** Commit the positions reached every autoCommitIntervalMs and on close. Default true. */
  autoCommit?: boolean;
  autoCommitIntervalMs?: number;
}

export interface ConsumedRecord {
  topic: string;
  partition: number;
  offset: bigint;
  timestamp: number;
  key: Buffer | null;
  value: Buffer | null;
  headers: [string, Buffer | null][];
}

export interface GroupMetadata { group: string; generation: number; memberId: string; }

export class Consumer implements AsyncIterable<ConsumedRecord> {
  constructor(client: Client, config?: ConsumerConfig);
  /** Reads partitions of a topic (all when omitted) from 'earliest', 'latest' or an offset. */
  assign(topic: string, partitions?: number[], from?: 'earliest' | 'latest' | bigint | number): Promise<void>;
  /** Joins config.group reading topics. */
  subscribe(topics: string | string[]): Promise<void>;
  assignment(): { topic: string; partition: number }[];
  groupMetadata(): GroupMetadata | null;
  /** The next record; null once closed. */
  next(): Promise<ConsumedRecord | null>;
  commit(): Promise<void>;
  close(): Promise<void>;
  [Symbol.asyncIterator](): AsyncIterator<ConsumedRecord>;
}

export class AeroStreamError extends Error {
  constructor(code: number, message?: string, options?: { retriable?: boolean; cause?: unknown });
  /** The protocol's error code; 0 for the client's own errors. */
  code: number;
  codeName: string;
  retriable: boolean;
}
export class ConnectionError extends AeroStreamError {}
export class ProtocolError extends Error {
  kind: 'short_header' | 'bad_magic' | 'bad_version' | 'too_large' | 'unknown_op' | 'truncated' | 'trailing' | 'count' | 'not_utf8' | 'invalid';
}
export class RecordsError extends Error {}

export const ErrorCode: Readonly<Record<string, number>>;
export const ERROR_CODES: [number, string, boolean, string][];
export function errorName(code: number): string;
export function isRetriable(code: number): boolean;

export const PROTOCOL_VERSION: number;
export const FRAMING_VERSION: number;
export const OPS: Readonly<Record<string, number>>;
export const MESSAGES: Readonly<Record<number, [string, unknown[]]>>;
/** A whole frame of operation op; values as the conformance corpus has them (bigint for 64-bit). */
export function encodeFrame(op: number, value: Record<string, unknown>): Buffer;
export function decodeFrame(frame: Buffer, maxBody?: number): { op: number; message: string; value: Record<string, any> };
export function decodeHeader(header: Buffer, maxBody: number): { op: number; length: number };
export function decodeBody(op: number, body: Buffer): Record<string, any>;

export const Compression: Readonly<{ none: 0; gzip: 1; snappy: 2; lz4: 3; zstd: 4 }>;
export interface BatchRecord { key?: Bytes | string | null; value?: Bytes | string | null; headers?: ProducerRecord['headers']; timestamp?: number; }
export function encodeBatch(records: BatchRecord[], options?: {
  producerId?: bigint; producerEpoch?: number; baseSequence?: number; transactional?: boolean; compression?: 'none' | 'gzip' | number;
}): Buffer;
export interface DecodedBatch {
  baseOffset: bigint; lastOffsetDelta: number; nextOffset: bigint; producerId: bigint; producerEpoch: number;
  baseSequence: number; compression: number; logAppendTime: boolean; transactional: boolean; control: boolean;
  maxTimestamp: number;
  records: { offset: bigint; timestamp: number; key: Buffer | null; value: Buffer | null; headers: [string, Buffer | null][] }[];
}
export function decodeBatches(data: Buffer, options?: { verifyCrc?: boolean }): DecodedBatch[];
export function crc32c(data: Uint8Array): number;
export function murmur2(key: Bytes | string): number;
export function partitionForKey(key: Bytes | string, partitions: number): number;

export class ScramClient {
  constructor(mechanism: 'SCRAM-SHA-256' | 'SCRAM-SHA-512', user: string, password: string, nonce?: string);
  first(): Buffer;
  final(serverFirst: Uint8Array): Buffer;
  verify(serverFinal: Uint8Array): void;
}
