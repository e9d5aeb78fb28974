package io.aerostream;

import java.time.Duration;

/**
 * Settings of a {@link AeroStreamClient}. Defaults: client id
 * {@code aerostream-java}, no login, 10 s to connect, 30 s per request.
 */
public final class ClientConfig {
    String clientId = "aerostream-java";
    String mechanism = "";
    String user = "";
    String password = "";
    Duration dialTimeout = Duration.ofSeconds(10);
    Duration requestTimeout = Duration.ofSeconds(30);

    public ClientConfig clientId(String id) {
        this.clientId = id;
        return this;
    }

    /**
     * Log in with PLAIN (in the hello), SCRAM-SHA-256 or SCRAM-SHA-512 (with
     * Authenticate messages); an empty mechanism logs in as nobody.
     */
    public ClientConfig sasl(String mechanism, String user, String password) {
        this.mechanism = mechanism == null ? "" : mechanism;
        this.user = user == null ? "" : user;
        this.password = password == null ? "" : password;
        return this;
    }

    public ClientConfig dialTimeout(Duration d) {
        this.dialTimeout = d;
        return this;
    }

    public ClientConfig requestTimeout(Duration d) {
        this.requestTimeout = d;
        return this;
    }
}
