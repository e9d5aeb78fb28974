package io.aerostream;

import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * A record to produce. A null key is absent (keyless records are spread
 * over the partitions); a null value is a tombstone. {@code partition} null
 * lets the producer choose: murmur2 of the key, or a sticky partition for a
 * keyless record. {@code timestamp} 0 means now.
 */
public record ProducerRecord(String topic, Integer partition, byte[] key, byte[] value, List<Header> headers,
        long timestamp) {
    public ProducerRecord {
        headers = headers == null ? List.of() : List.copyOf(headers);
    }

    public ProducerRecord(String topic, byte[] key, byte[] value) {
        this(topic, null, key, value, List.of(), 0);
    }

    public ProducerRecord(String topic, byte[] value) {
        this(topic, null, null, value, List.of(), 0);
    }

    public static ProducerRecord of(String topic, String key, String value) {
        return new ProducerRecord(topic, key == null ? null : key.getBytes(StandardCharsets.UTF_8),
                value == null ? null : value.getBytes(StandardCharsets.UTF_8));
    }
}
