package io.aerostream.connect;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A Java process of Apache Kafka's (a Connect worker, MirrorMaker) started from this
 * module's classpath, its output in a log file of its own.
 */
final class JvmProcess implements AutoCloseable {
    private final String mainClass;
    private final List<String> args;
    private final Path log;
    private Process process;
    private int starts;

    JvmProcess(String mainClass, List<String> args, Path log) {
        this.mainClass = mainClass;
        this.args = args;
        this.log = log;
    }

    /** The test JVM's classpath: surefire names it in a property of its own. */
    private static String classpath() {
        String cp = System.getProperty("surefire.test.class.path");
        return cp == null || cp.isBlank() ? System.getProperty("java.class.path") : cp;
    }

    void start() {
        if (process != null && process.isAlive()) {
            throw new IllegalStateException(mainClass + " is already running");
        }
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        // small and quick to start: these processes move little data
        cmd.addAll(List.of("-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-XX:-UsePerfData", "-Djava.awt.headless=true",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.common.config=warn",
                "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients=warn",
                "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.common.utils.AppInfoParser=warn",
                "-Dorg.slf4j.simpleLogger.log.org.eclipse.jetty=warn",
                "-Dorg.slf4j.simpleLogger.log.org.reflections=warn",
                "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.connect.runtime.isolation=warn",
                "-cp", classpath(), mainClass));
        cmd.addAll(args);
        starts++;
        try {
            Files.writeString(log, "==== start " + starts + ": " + String.join(" ", args) + "\n",
                    java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.APPEND);
            process = new ProcessBuilder(cmd)
                    .redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
                    .start();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    boolean alive() {
        return process != null && process.isAlive();
    }

    Path log() {
        return log;
    }

    /** Kills the process with SIGKILL (kill -9) and waits until it is gone. */
    void kill() throws InterruptedException {
        if (process != null) {
            process.destroyForcibly();
            process.waitFor();
        }
    }

    /** Stops the process with SIGTERM, as an operator does; kills it when it does not stop. */
    @Override
    public void close() throws InterruptedException {
        if (process != null && process.isAlive()) {
            process.destroy();
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                kill();
            }
        }
    }
}
