# AeroStream in a container: one agent, data in a volume, security on.
#
#   docker build -t aerostream .
#   printf 'admin:%s\n' "$(openssl rand -base64 24)" > admin && chmod 600 admin
#   docker run --rm -p 9092:9092 -p 9091:9091/tcp -p 9091:9091/udp -p 9001:9001 \
#       -v ./admin:/run/secrets/aerostream-admin:ro -v aerostream-data:/var/lib/aerostream aerostream
#
# The start script (deploy/docker/entrypoint.sh) turns on SCRAM logins for
# that admin user and TLS on the Kafka listener (a certificate from a CA in
# the volume, kafka-tls/ca.pem, unless AEROSTREAM_KAFKA_TLS_CERT and _KEY
# name mounted files), and refuses to listen on 0.0.0.0 without logins
# unless AEROSTREAM_INSECURE=true (docs/deploy.md, "A container instead").
#
# The build stage runs the same two commands as scripts/run.sh (its build
# steps; tests/deploy/test_dockerfile.py keeps them equal), on a fresh Debian
# where scripts/setup.sh installs the build packages and a Rust toolchain.

FROM debian:bookworm-slim AS build
WORKDIR /src
ENV CARGO_TARGET_DIR=/src/target \
    PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY . .
RUN scripts/setup.sh --build-only \
 && cargo build --release --locked -p agent --bin aerostream \
 && cp "$CARGO_TARGET_DIR/release/aerostream" /usr/local/bin/aerostream

FROM debian:bookworm-slim
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ca-certificates openssl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/aerostream --shell /usr/sbin/nologin aerostream \
 && install -d -o aerostream -g aerostream -m 0750 /var/lib/aerostream
COPY --from=build /usr/local/bin/aerostream /usr/local/bin/aerostream
COPY deploy/docker/entrypoint.sh /usr/local/bin/aerostream-entrypoint
COPY scripts/kafka-tls.sh /usr/local/lib/aerostream/kafka-tls.sh

# Listen on every address of the container; tell clients to come back
# through the published ports on the host (override both advertised
# addresses with -e when clients reach the container another way).
ENV AEROSTREAM_DATA_DIR=/var/lib/aerostream \
    AEROSTREAM_KAFKA_ADDR=0.0.0.0:9092 \
    AEROSTREAM_ADVERTISED_KAFKA_ADDR=127.0.0.1:9092 \
    AEROSTREAM_NATIVE_ADDR=0.0.0.0:9091 \
    AEROSTREAM_ADVERTISED_NATIVE_ADDR=127.0.0.1:9091 \
    AEROSTREAM_HTTP_ADDR=0.0.0.0:9001

USER aerostream
VOLUME ["/var/lib/aerostream"]
# Kafka, native protocol (TCP, and QUIC on UDP), health and metrics
EXPOSE 9092/tcp 9091/tcp 9091/udp 9001/tcp
# /health answers 200 while serving, 503 while stopping (no curl in the image: bash's /dev/tcp)
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9001 && printf 'GET /health HTTP/1.0\\r\\n\\r\\n' >&3 && head -n1 <&3 | grep -q ' 200 '"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/aerostream-entrypoint"]
CMD ["serve"]
