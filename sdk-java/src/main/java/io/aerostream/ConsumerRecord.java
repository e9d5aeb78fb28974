package io.aerostream;

import java.nio.charset.StandardCharsets;
import java.util.List;

/** A record read from a partition. Key and value are null when absent. */
public record ConsumerRecord(String topic, int partition, long offset, long timestamp, byte[] key, byte[] value,
        List<Header> headers) {
    /** The value as UTF-8 text (null for a tombstone). */
    public String valueString() {
        return value == null ? null : new String(value, StandardCharsets.UTF_8);
    }

    /** The key as UTF-8 text (null when absent). */
    public String keyString() {
        return key == null ? null : new String(key, StandardCharsets.UTF_8);
    }
}
