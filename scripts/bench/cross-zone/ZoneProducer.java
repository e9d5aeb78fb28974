import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Produces COUNT keyless records of SIZE bytes to TOPIC with acks=all, as a
 * producer in zone RACK: with RACK_AWARE=true the built-in partitioner
 * prefers partitions led in its own zone (KIP-1123). Prints the records
 * and value bytes acknowledged: "acked N bytes B".
 *
 * Usage: java -cp CLASSPATH ZoneProducer.java BOOTSTRAP TOPIC RACK RACK_AWARE COUNT SIZE
 */
public class ZoneProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], rack = args[2];
        boolean rackAware = Boolean.parseBoolean(args[3]);
        long count = Long.parseLong(args[4]);
        int size = Integer.parseInt(args[5]);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "65536");
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "zone-producer-" + rack);
        p.put("client.rack", rack);
        p.put("partitioner.rack.aware", Boolean.toString(rackAware));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        byte[] value = new byte[size];
        new java.util.Random(rack.hashCode()).nextBytes(value);
        AtomicLong acked = new AtomicLong();
        AtomicReference<Exception> failed = new AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (long i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, null, value), (md, e) -> {
                    if (e != null) {
                        failed.compareAndSet(null, e);
                    } else {
                        acked.incrementAndGet();
                    }
                });
            }
            producer.flush();
        }
        if (failed.get() != null) {
            throw failed.get();
        }
        System.out.println("acked " + acked.get() + " bytes " + acked.get() * size);
    }
}
