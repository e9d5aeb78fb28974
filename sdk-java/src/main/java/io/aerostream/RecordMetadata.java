package io.aerostream;

/** Where a produced record was written. */
public record RecordMetadata(String topic, int partition, long offset, long timestamp) {}
