package io.aerostream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import io.aerostream.proto.Codec;
import io.aerostream.proto.DecodeException;
import io.aerostream.proto.Hex;
import io.aerostream.proto.Message;
import io.aerostream.proto.MessageType;
import io.aerostream.proto.Messages;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The codec against every vector of the conformance corpus (sdk/vectors/):
 * each frame decodes to its value and each value encodes to its frame byte
 * for byte; each malformed frame is refused with its class.
 */
class CorpusTest {
    static final String[] MESSAGE_FILES = {"connection.json", "metadata.json", "produce.json", "fetch.json",
        "groups.json", "subscribe.json", "txn.json", "errors.json"};

    static void checkVector(String where, String messageName, long op, String frameHex, JsonNode value) {
        MessageType type = Messages.byName(messageName);
        assertNotNull(type, where + ": no layout named " + messageName);
        if (op >= 0) {
            assertEquals(op, type.op, where + ": op");
        }
        Message decoded = Codec.decodeFrame(Hex.decode(frameHex), 1L << 32);
        assertEquals(type, decoded.type(), where + ": decoded as another message");
        JsonNode got = CorpusJson.toJson(decoded);
        assertTrue(CorpusJson.same(value, got), where + ": decodes to\n" + got + "\nwant\n" + value);
        String encoded = Hex.encode(Codec.encode(CorpusJson.toMessage(type, value)));
        assertEquals(frameHex, encoded, where + ": encodes to another frame");
    }

    @TestFactory
    Stream<DynamicTest> messageVectors() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        for (String file : MESSAGE_FILES) {
            JsonNode vectors = CorpusJson.read(file).get("vectors");
            assertTrue(vectors.size() > 0, file + " has no vector");
            for (JsonNode v : vectors) {
                String where = file + ": " + v.get("name").asText();
                tests.add(DynamicTest.dynamicTest(where, () -> checkVector(where, v.get("message").asText(),
                        v.get("op").asLong(), v.get("frame").asText(), v.get("value"))));
            }
        }
        return tests.stream();
    }

    @Test
    void everyMessageOfTheProtocolHasAVector() throws IOException {
        Set<String> seen = new HashSet<>();
        for (String file : MESSAGE_FILES) {
            for (JsonNode v : CorpusJson.read(file).get("vectors")) {
                seen.add(v.get("message").asText());
            }
        }
        for (MessageType t : Messages.all()) {
            assertTrue(seen.contains(t.name), t.name + " has no vector in the corpus");
        }
    }

    @TestFactory
    Stream<DynamicTest> malformedFramesAreRefusedWithTheirClass() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        JsonNode vectors = CorpusJson.read("malformed.json").get("vectors");
        assertTrue(vectors.size() > 0);
        for (JsonNode v : vectors) {
            String where = "malformed.json: " + v.get("name").asText();
            tests.add(DynamicTest.dynamicTest(where, () -> {
                byte[] frame = Hex.decode(v.get("frame").asText());
                DecodeException e = assertThrows(DecodeException.class,
                        () -> Codec.decodeFrame(frame, v.get("max_body").asLong()), where + ": accepted");
                assertEquals(v.get("error").asText(), e.refusal(), where + ": refused as " + e.getMessage());
            }));
        }
        return tests.stream();
    }

    @TestFactory
    Stream<DynamicTest> conversations() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : CorpusJson.read("conversations.json").get("conversations")) {
            String name = "conversations.json: " + c.get("name").asText();
            tests.add(DynamicTest.dynamicTest(name, () -> {
                Set<Long> asked = new HashSet<>();
                int i = 0;
                for (JsonNode step : c.get("steps")) {
                    String where = name + " step " + i++;
                    checkVector(where, step.get("message").asText(), -1, step.get("frame").asText(),
                            step.get("value"));
                    Message m = Codec.decodeFrame(Hex.decode(step.get("frame").asText()), 1L << 32);
                    String from = step.get("from").asText();
                    if (from.equals("client")) {
                        assertEquals(0, m.op() & Codec.RESPONSE, where + ": a client sends requests");
                        asked.add(m.correlation());
                    } else {
                        assertTrue((m.op() & Codec.RESPONSE) != 0 || m.op() == 0x7F, where + ": a server answers");
                        if (m.correlation() >= 0 && m.op() != 0x7F) {
                            assertTrue(asked.contains(m.correlation()), where + ": answers no request");
                        }
                    }
                }
            }));
        }
        return tests.stream();
    }

    @Test
    void errorCodesAgreeWithTheCorpus() throws IOException {
        JsonNode codes = CorpusJson.read("error_codes.json").get("error_codes");
        assertEquals(codes.size(), ErrorCode.all().size(), "number of codes");
        for (JsonNode c : codes) {
            ErrorCode mine = ErrorCode.of(c.get("code").asInt());
            assertEquals(c.get("name").asText(), mine.name());
            assertEquals(c.get("retriable").asBoolean(), mine.retriable(), mine.name() + " retriable");
        }
        assertFalse(ErrorCode.of(9999).retriable(), "an unknown code is not retriable");
    }

    @Test
    void partitionerMatchesTheCorpus() throws IOException {
        JsonNode keys = CorpusJson.read("partitioner.json").get("keys");
        assertTrue(keys.size() > 0);
        for (JsonNode k : keys) {
            byte[] key = Hex.decode(k.get("key").asText());
            assertEquals(k.get("murmur2").asInt(), Partitioner.murmur2(key), "murmur2 of " + k.get("key"));
            for (var e : CorpusJson.fields(k.get("partitions"))) {
                assertEquals(e.getValue().asInt(), Partitioner.partitionForKey(key, Integer.parseInt(e.getKey())),
                        "partition of " + k.get("key") + " among " + e.getKey());
            }
        }
    }

    @TestFactory
    Stream<DynamicTest> recordBatchesMatchTheCorpus() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode b : CorpusJson.read("record_batches.json").get("batches")) {
            String name = "record_batches.json: " + b.get("name").asText();
            tests.add(DynamicTest.dynamicTest(name, () -> {
                List<ProducerRecord> records = new ArrayList<>();
                List<Long> stamps = new ArrayList<>();
                for (JsonNode r : b.get("records")) {
                    List<Header> headers = new ArrayList<>();
                    for (JsonNode h : r.get("headers")) {
                        headers.add(new Header(h.get(0).asText(), h.get(1).isNull() ? null : Hex.decode(h.get(1).asText())));
                    }
                    records.add(new ProducerRecord("t", 0, r.get("key").isNull() ? null : Hex.decode(r.get("key").asText()),
                            r.get("value").isNull() ? null : Hex.decode(r.get("value").asText()), headers,
                            r.get("timestamp").asLong()));
                    stamps.add(r.get("timestamp").asLong());
                }
                JsonNode p = b.get("producer");
                RecordBatch.Identity who = p.isNull() ? RecordBatch.Identity.NONE
                        : new RecordBatch.Identity(p.get("producer_id").asLong(), (short) p.get("producer_epoch").asInt(),
                                p.get("base_sequence").asInt());
                long[] ts = stamps.stream().mapToLong(Long::longValue).toArray();
                byte[] got = RecordBatch.encode(records, ts, who, b.get("transactional").asBoolean(), Compression.NONE);
                assertEquals(b.get("batch").asText(), Hex.encode(got), name + ": encodes to another batch");

                byte[] want = Hex.decode(b.get("batch").asText());
                RecordBatch.Decoded d = RecordBatch.decode("t", 0, want, 0);
                assertEquals(records.size(), d.records().size(), name + ": records read back");
                assertEquals(records.size(), d.next(), name + ": next offset");
                for (int i = 0; i < records.size(); i++) {
                    ConsumerRecord r = d.records().get(i);
                    ProducerRecord w = records.get(i);
                    assertEquals(i, r.offset());
                    assertEquals(ts[i], r.timestamp());
                    assertEquals(hex(w.key()), hex(r.key()), name + ": key " + i);
                    assertEquals(hex(w.value()), hex(r.value()), name + ": value " + i);
                    assertEquals(w.headers().size(), r.headers().size(), name + ": headers " + i);
                    for (int h = 0; h < w.headers().size(); h++) {
                        assertEquals(w.headers().get(h).key(), r.headers().get(h).key());
                        assertEquals(hex(w.headers().get(h).value()), hex(r.headers().get(h).value()));
                    }
                }
                byte[] cut = java.util.Arrays.copyOf(want, want.length - 1);
                RecordBatch.Decoded partial = RecordBatch.decode("t", 0, cut, 0);
                assertEquals(0, partial.records().size(), name + ": a partial batch gives no record");
                assertEquals(-1, partial.next(), name + ": a partial batch gives no next offset");
                byte[] bad = want.clone();
                bad[bad.length - 1] ^= 1;
                try {
                    RecordBatch.decode("t", 0, bad, 0);
                    fail(name + ": a batch with a wrong CRC was read");
                } catch (AeroStreamException e) {
                    assertTrue(e.getMessage().contains("CRC"), e.getMessage());
                }
            }));
        }
        return tests.stream();
    }

    private static String hex(byte[] b) {
        return b == null ? "null" : Hex.encode(b);
    }
}
