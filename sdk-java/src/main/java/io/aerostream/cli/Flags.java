package io.aerostream.cli;

import io.aerostream.AeroStreamClient;
import io.aerostream.ClientConfig;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/** Command-line flags ({@code --name value} or {@code --name=value}) and the connection flags shared by the commands. */
final class Flags {
    private final String command;
    private final Map<String, String> values = new HashMap<>();
    private final Map<String, String> help = new LinkedHashMap<>();
    private final Set<String> booleans;

    Flags(String command, Map<String, String> help, Set<String> booleans) {
        this.command = command;
        this.help.put("bootstrap", "bootstrap URL: aero://HOST:PORT (or aero://h1:9091,h2:9091); aero+quic://HOST:PORT for QUIC");
        this.help.put("tls-ca", "for aero+quic://: the CA certificate (PEM) that signed the servers' certificates, e.g. the agent's DATA_DIR/native-tls/ca.pem");
        this.help.put("insecure", "for aero+quic://: accept any server certificate (trying things out only)");
        this.help.put("sasl-mechanism", "log in with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (password from --password or $AEROSTREAM_PASSWORD)");
        this.help.put("user", "user name of the login");
        this.help.put("password", "password of the login (default $AEROSTREAM_PASSWORD)");
        this.help.putAll(help);
        this.booleans = new java.util.HashSet<>(booleans);
        this.booleans.add("insecure");
    }

    String usage() {
        StringBuilder sb = new StringBuilder("usage: " + command + " [flags]\n");
        help.forEach((k, v) -> sb.append(String.format("  --%-18s %s%n", k, v)));
        return sb.toString();
    }

    /** Parses args; false when help was asked for. */
    boolean parse(String[] args) {
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("-h") || a.equals("--help")) {
                System.out.print(usage());
                return false;
            }
            if (!a.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument \"" + a + "\"\n" + usage());
            }
            String name = a.substring(2);
            String value;
            int eq = name.indexOf('=');
            if (eq >= 0) {
                value = name.substring(eq + 1);
                name = name.substring(0, eq);
            } else if (booleans.contains(name)) {
                value = "true";
            } else {
                if (i + 1 >= args.length) {
                    throw new IllegalArgumentException("--" + name + " needs a value");
                }
                value = args[++i];
            }
            if (!help.containsKey(name)) {
                throw new IllegalArgumentException("unknown flag --" + name + "\n" + usage());
            }
            values.put(name, value);
        }
        return true;
    }

    String get(String name, String def) {
        return values.getOrDefault(name, def);
    }

    boolean has(String name) {
        return values.containsKey(name);
    }

    String require(String name, String example) {
        String v = values.get(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException("--" + name + " is required" + (example.isEmpty() ? "" : ", e.g. " + example));
        }
        return v;
    }

    long getLong(String name, long def) {
        String v = values.get(name);
        if (v == null) {
            return def;
        }
        try {
            return Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + name + " \"" + v + "\" is not a number");
        }
    }

    /** Connects as the connection flags say. */
    AeroStreamClient connect(String clientId) {
        String bootstrap = require("bootstrap", "--bootstrap aero://127.0.0.1:9091");
        boolean quic = bootstrap.startsWith("aero+quic://");
        if ((has("tls-ca") || has("insecure")) && !quic) {
            throw new IllegalArgumentException("--tls-ca and --insecure apply to aero+quic:// only: aero:// is plain TCP");
        }
        if (quic && !has("tls-ca") && !has("insecure")) {
            throw new IllegalArgumentException("aero+quic:// needs --tls-ca FILE (the agent's DATA_DIR/native-tls/ca.pem) or --insecure");
        }
        String password = get("password", "");
        if (password.isEmpty()) {
            String env = System.getenv("AEROSTREAM_PASSWORD");
            password = env == null ? "" : env;
        }
        ClientConfig cfg = new ClientConfig().clientId(clientId)
                .sasl(get("sasl-mechanism", ""), get("user", ""), password);
        if (has("tls-ca")) {
            cfg.tlsCaFile(java.nio.file.Path.of(get("tls-ca", "")));
        }
        if (has("insecure")) {
            cfg.insecureSkipVerify(Boolean.parseBoolean(get("insecure", "true")));
        }
        return AeroStreamClient.connect(bootstrap, cfg);
    }

    static void fail(String command, Throwable e) {
        System.err.println(command + ": " + (e.getMessage() == null ? e.toString() : e.getMessage()));
        System.exit(1);
    }
}
