package io.aerostream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Logins against an agent that requires them. */
@Timeout(120)
class LoginTest {
    @Test
    void plainAndScramLoginsAndRefusals() throws Exception {
        try (TestAgent a = TestAgent.start("--sasl-mechanisms", "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
                "--admin-user", "admin:admin-secret")) {
            for (String mech : new String[] {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}) {
                try (AeroStreamClient c = AeroStreamClient.connect(a.bootstrap,
                        new ClientConfig().sasl(mech, "admin", "admin-secret"))) {
                    c.createTopic("t-" + mech, 1, (short) -1, Map.of());
                    assertTrue(c.listTopics().containsKey("t-" + mech), mech);
                }
                AeroStreamException e = assertThrows(AeroStreamException.class, () -> AeroStreamClient.connect(
                        a.bootstrap, new ClientConfig().sasl(mech, "admin", "wrong")), mech + " with a wrong password");
                assertEquals(ErrorCode.AUTHENTICATION_FAILED, e.code(), mech + ": " + e.getMessage());
                assertTrue(e.getMessage().contains("AUTHENTICATION_FAILED"), e.getMessage());
            }
            AeroStreamException e = assertThrows(AeroStreamException.class,
                    () -> AeroStreamClient.connect(a.bootstrap));
            assertEquals(ErrorCode.AUTHENTICATION_REQUIRED, e.code(), "without login: " + e.getMessage());
        }
    }
}
