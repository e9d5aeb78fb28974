package io.aerostream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.aerostream.proto.Codec;
import io.aerostream.proto.DecodeException;
import io.aerostream.proto.Hex;
import io.aerostream.proto.Message;
import io.aerostream.proto.Messages;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

class UnitTest {
    @Test
    void bootstrapUrls() {
        assertEquals(List.of("127.0.0.1:9091"), AeroStreamClient.parseBootstrap("aero://127.0.0.1:9091"));
        assertEquals(List.of("h1:9091", "h2:9092"), AeroStreamClient.parseBootstrap("aero://h1:9091, aero://h2:9092/"));
        assertEquals(List.of("[::1]:9091"), AeroStreamClient.parseBootstrap("aero://[::1]:9091"));
        for (String bad : new String[] {"kafka://h:1", "aero://h", "aero://h:0", "aero://h:x", "aero://:9091"}) {
            assertThrows(IllegalArgumentException.class, () -> AeroStreamClient.parseBootstrap(bad), bad);
        }
        assertEquals(List.of("h:9091"), AeroStreamClient.parseBootstrap("aero+quic://h:9091"));
        IllegalArgumentException noCa = assertThrows(IllegalArgumentException.class,
                () -> AeroStreamClient.connect("aero+quic://127.0.0.1:1"));
        assertTrue(noCa.getMessage().contains("CA"), noCa.getMessage());
        IllegalArgumentException caOnTcp = assertThrows(IllegalArgumentException.class,
                () -> AeroStreamClient.connect("aero://127.0.0.1:1", new ClientConfig().insecureSkipVerify(true)));
        assertTrue(caOnTcp.getMessage().contains("aero+quic:// only"), caOnTcp.getMessage());
    }

    @Test
    void startPositions() {
        assertEquals(StartAt.EARLIEST, StartAt.parse("earliest"));
        assertEquals(StartAt.LATEST, StartAt.parse("latest"));
        assertEquals(StartAt.offset(42), StartAt.parse("42"));
        assertThrows(IllegalArgumentException.class, () -> StartAt.parse("-1"));
        assertThrows(IllegalArgumentException.class, () -> StartAt.parse("soon"));
    }

    @Test
    void everyCompressionRoundTripsAndMarksTheBatch() {
        List<ProducerRecord> records = new ArrayList<>();
        long[] stamps = new long[500];
        for (int i = 0; i < 500; i++) {
            records.add(new ProducerRecord("t", 0, i % 2 == 0 ? null : ("k" + i).getBytes(StandardCharsets.UTF_8),
                    ("value " + i + " ".repeat(i % 50)).getBytes(StandardCharsets.UTF_8), List.of(), 0));
            stamps[i] = 1_700_000_000_000L + i;
        }
        for (Compression c : Compression.values()) {
            byte[] batch = RecordBatch.encode(records, stamps, RecordBatch.Identity.NONE, false, c);
            assertEquals(c.id(), batch[22] & 0x07, c + ": attribute");
            RecordBatch.Decoded d = RecordBatch.decode("t", 0, batch, 10);
            assertEquals(490, d.records().size(), c + ": records from offset 10");
            assertEquals(500, d.next());
            for (ConsumerRecord r : d.records()) {
                int i = (int) r.offset();
                assertArrayEquals(records.get(i).value(), r.value(), c + ": value " + i);
                assertArrayEquals(records.get(i).key(), r.key(), c + ": key " + i);
                assertEquals(stamps[i], r.timestamp());
            }
        }
    }

    @Test
    void aRecordWithARepeatedHeaderIsRefused() {
        ProducerRecord r = new ProducerRecord("t", 0, null, new byte[1],
                List.of(new Header("a", null), new Header("a", new byte[0])), 0);
        assertThrows(IllegalArgumentException.class,
                () -> RecordBatch.encode(List.of(r), new long[] {1}, RecordBatch.Identity.NONE, false, Compression.NONE));
    }

    @Test
    void aLyingRecordCountIsRefusedNotAllocated() {
        byte[] batch = RecordBatch.encode(List.of(new ProducerRecord("t", new byte[] {1})), new long[] {1},
                RecordBatch.Identity.NONE, false, Compression.NONE);
        java.nio.ByteBuffer.wrap(batch).putInt(57, Integer.MAX_VALUE);
        java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
        crc.update(batch, 21, batch.length - 21);
        java.nio.ByteBuffer.wrap(batch).putInt(17, (int) crc.getValue());
        AeroStreamException e = assertThrows(AeroStreamException.class, () -> RecordBatch.decode("t", 0, batch, 0));
        assertTrue(e.getMessage().contains("claims"), e.getMessage());
    }

    /** Hostile frames: every cut and every flipped byte of every corpus frame is decoded or refused, never a crash. */
    @Test
    void mutatedFramesAreRefusedCleanly() throws Exception {
        Random rnd = new Random(7);
        int refused = 0;
        for (String file : CorpusTest.MESSAGE_FILES) {
            for (JsonNode v : CorpusJson.read(file).get("vectors")) {
                byte[] frame = Hex.decode(v.get("frame").asText());
                for (int cut = 0; cut < frame.length; cut++) {
                    byte[] part = java.util.Arrays.copyOf(frame, cut);
                    DecodeException e = assertThrows(DecodeException.class, () -> Codec.decodeFrame(part, 1 << 20));
                    assertTrue(e.refusal().equals("short_header") || e.refusal().equals("truncated"), e.getMessage());
                }
                for (int i = 0; i < 64; i++) {
                    byte[] m = frame.clone();
                    int at = Codec.HEADER_LEN + rnd.nextInt(Math.max(1, m.length - Codec.HEADER_LEN));
                    if (at >= m.length) {
                        continue;
                    }
                    m[at] = (byte) rnd.nextInt(256);
                    try {
                        Message decoded = Codec.decodeFrame(m, 1 << 20);
                        // what decodes encodes again to the same bytes, unless a lenient boolean changed
                        if (!decoded.type().name.contains("Authenticate")) {
                            assertEquals(Hex.encode(m), Hex.encode(Codec.encode(decoded)), v.get("name").asText());
                        }
                    } catch (DecodeException e) {
                        refused++;
                    }
                }
            }
        }
        assertTrue(refused > 0);
    }

    @Test
    void aHeaderAnnouncingTooMuchIsRefusedBeforeTheBody() {
        byte[] head = {(byte) 0xAE, 1, (byte) 0x88, (byte) 0xFF, (byte) 0xFF, (byte) 0xFF, (byte) 0xFF};
        DecodeException e = assertThrows(DecodeException.class,
                () -> Codec.decodeHeader(head, Connection.MAX_RESPONSE_BYTES));
        assertEquals("too_large", e.refusal());
    }

    @Test
    void longStringsAreCutOnACharacterBoundary() {
        String s = "é".repeat(40000); // 80,000 bytes
        Message m = Messages.DELETE_TOPIC.with("correlation", 1, "name", s);
        Message back = Codec.decodeFrame(Codec.encode(m), 1 << 20);
        String got = back.getString("name");
        assertEquals(32767, got.length());
        assertTrue(s.startsWith(got));
    }

    @Test
    void unknownErrorCodesAreNotRetriable() {
        AeroStreamException e = new AeroStreamException(999, "x", "");
        assertEquals(false, e.retriable());
        assertTrue(e.getMessage().contains("UNKNOWN_CODE_999"));
        assertTrue(new AeroStreamException(ErrorCode.NOT_LEADER, "x", "").retriable());
        assertNull(Messages.byOp(0x7E));
    }
}
