package io.aerostream;

/**
 * Kafka's murmur2 partitioner: a keyed record goes to
 * {@code (murmur2(key) & 0x7fffffff) % partitions}, as Kafka's Java client
 * and every AeroStream SDK pick it, so both protocols put a key in the same
 * partition.
 */
public final class Partitioner {
    private Partitioner() {}

    /** Kafka's murmur2 of data, as a signed 32-bit integer. */
    public static int murmur2(byte[] data) {
        final int m = 0x5bd1e995;
        final int r = 24;
        int length = data.length;
        int h = 0x9747b28c ^ length;
        int length4 = length / 4;
        for (int i = 0; i < length4; i++) {
            int i4 = i * 4;
            int k = (data[i4] & 0xff) + ((data[i4 + 1] & 0xff) << 8) + ((data[i4 + 2] & 0xff) << 16)
                    + ((data[i4 + 3] & 0xff) << 24);
            k *= m;
            k ^= k >>> r;
            k *= m;
            h *= m;
            h ^= k;
        }
        int tail = length & ~3;
        switch (length % 4) {
            case 3:
                h ^= (data[tail + 2] & 0xff) << 16;
                // fall through
            case 2:
                h ^= (data[tail + 1] & 0xff) << 8;
                // fall through
            case 1:
                h ^= data[tail] & 0xff;
                h *= m;
                break;
            default:
                break;
        }
        h ^= h >>> 13;
        h *= m;
        h ^= h >>> 15;
        return h;
    }

    /** The partition of a key among {@code partitions}. */
    public static int partitionForKey(byte[] key, int partitions) {
        if (partitions <= 0) {
            throw new IllegalArgumentException("a topic has at least one partition");
        }
        return (murmur2(key) & 0x7fffffff) % partitions;
    }
}
