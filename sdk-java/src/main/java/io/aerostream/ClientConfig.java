package io.aerostream;

import java.nio.file.Path;
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
    Path tlsCaFile;
    boolean insecure;

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

    /**
     * For aero+quic://: the CA certificate (PEM) that signed the servers'
     * certificates, e.g. the agent's DATA_DIR/native-tls/ca.pem.
     */
    public ClientConfig tlsCaFile(Path ca) {
        this.tlsCaFile = ca;
        return this;
    }

    /**
     * For aero+quic://: accept any server certificate. Traffic is encrypted
     * but anyone on the path can pose as the server: for trying things out.
     */
    public ClientConfig insecureSkipVerify(boolean on) {
        this.insecure = on;
        return this;
    }
}
