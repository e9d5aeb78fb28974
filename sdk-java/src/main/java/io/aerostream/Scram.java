package io.aerostream;

import io.aerostream.proto.Message;
import io.aerostream.proto.Messages;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/** SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802) over Authenticate messages. */
final class Scram {
    private Scram() {}

    /** Logs in on a fresh connection; gives the session lifetime (ms, 0 for none). */
    static long login(Connection c, String mech, String user, String password) throws IOException {
        String alg = mech.equals("SCRAM-SHA-512") ? "HmacSHA512" : "HmacSHA256";
        String digest = mech.equals("SCRAM-SHA-512") ? "SHA-512" : "SHA-256";
        byte[] raw = new byte[18];
        new SecureRandom().nextBytes(raw);
        String nonce = Base64.getEncoder().withoutPadding().encodeToString(raw);
        String name = user.replace("=", "=3D").replace(",", "=2C");
        String clientFirstBare = "n=" + name + ",r=" + nonce;
        Message first = c.exchange(Messages.AUTHENTICATE.with("correlation", 1, "mechanism", mech,
                "auth_bytes", ("n,," + clientFirstBare).getBytes(StandardCharsets.UTF_8)));
        expect(first);
        AeroStreamException.check(first.error(), "", "SCRAM login");
        String serverFirst = new String(first.getBytes("auth_bytes"), StandardCharsets.UTF_8);
        Map<String, String> attrs = attrs(serverFirst);
        String serverNonce = attrs.getOrDefault("r", "");
        if (!serverNonce.startsWith(nonce) || serverNonce.length() == nonce.length()) {
            throw new AeroStreamException("SCRAM: the server's nonce does not extend the client's");
        }
        byte[] salt;
        try {
            salt = Base64.getDecoder().decode(attrs.getOrDefault("s", ""));
        } catch (IllegalArgumentException e) {
            throw new AeroStreamException("SCRAM: the server's salt is not base64");
        }
        int iterations;
        try {
            iterations = Integer.parseInt(attrs.getOrDefault("i", ""));
        } catch (NumberFormatException e) {
            iterations = -1;
        }
        if (iterations < 1 || iterations > 10_000_000) {
            throw new AeroStreamException("SCRAM: iteration count \"" + attrs.get("i") + "\" refused");
        }
        try {
            byte[] salted = pbkdf2(alg, password.getBytes(StandardCharsets.UTF_8), salt, iterations);
            byte[] clientKey = hmac(alg, salted, "Client Key".getBytes(StandardCharsets.UTF_8));
            byte[] storedKey = MessageDigest.getInstance(digest).digest(clientKey);
            String finalNoProof = "c=biws,r=" + serverNonce;
            String authMessage = clientFirstBare + "," + serverFirst + "," + finalNoProof;
            byte[] signature = hmac(alg, storedKey, authMessage.getBytes(StandardCharsets.UTF_8));
            byte[] proof = new byte[clientKey.length];
            for (int i = 0; i < proof.length; i++) {
                proof[i] = (byte) (clientKey[i] ^ signature[i]);
            }
            String fin = finalNoProof + ",p=" + Base64.getEncoder().encodeToString(proof);
            Message last = c.exchange(Messages.AUTHENTICATE.with("correlation", 2, "mechanism", mech,
                    "auth_bytes", fin.getBytes(StandardCharsets.UTF_8)));
            expect(last);
            AeroStreamException.check(last.error(), "", "SCRAM login");
            byte[] serverKey = hmac(alg, salted, "Server Key".getBytes(StandardCharsets.UTF_8));
            String want = Base64.getEncoder().encodeToString(hmac(alg, serverKey,
                    authMessage.getBytes(StandardCharsets.UTF_8)));
            String got = attrs(new String(last.getBytes("auth_bytes"), StandardCharsets.UTF_8)).getOrDefault("v", "");
            if (!MessageDigest.isEqual(want.getBytes(StandardCharsets.UTF_8), got.getBytes(StandardCharsets.UTF_8))) {
                throw new AeroStreamException("SCRAM: the server's signature is wrong: it does not know the password");
            }
            if (!last.getBool("complete")) {
                throw new AeroStreamException("SCRAM: the server did not complete the login");
            }
            return last.getLong("session_lifetime_ms");
        } catch (GeneralSecurityException e) {
            throw new AeroStreamException("SCRAM: " + e.getMessage(), e);
        }
    }

    private static void expect(Message m) {
        if (m.type() != Messages.AUTHENTICATE_RESPONSE) {
            throw new AeroStreamException("the server answered an Authenticate with " + m.name());
        }
    }

    static Map<String, String> attrs(String s) {
        Map<String, String> out = new HashMap<>();
        for (String part : s.split(",")) {
            int eq = part.indexOf('=');
            if (eq == 1) {
                out.put(part.substring(0, 1), part.substring(2));
            }
        }
        return out;
    }

    static byte[] hmac(String alg, byte[] key, byte[] data) throws GeneralSecurityException {
        Mac mac = Mac.getInstance(alg);
        mac.init(new SecretKeySpec(key, alg));
        return mac.doFinal(data);
    }

    static byte[] pbkdf2(String alg, byte[] password, byte[] salt, int iterations) throws GeneralSecurityException {
        Mac prf = Mac.getInstance(alg);
        prf.init(new SecretKeySpec(password, alg));
        prf.update(salt);
        prf.update(new byte[] {0, 0, 0, 1});
        byte[] u = prf.doFinal();
        byte[] out = u.clone();
        for (int i = 1; i < iterations; i++) {
            u = prf.doFinal(u);
            for (int j = 0; j < out.length; j++) {
                out[j] ^= u[j];
            }
        }
        return out;
    }
}
