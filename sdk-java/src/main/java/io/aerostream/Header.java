package io.aerostream;

/** A record header: a key and a value (null is absent). */
public record Header(String key, byte[] value) {}
