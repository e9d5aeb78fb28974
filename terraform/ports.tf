# The agent's listeners. These are the binary's defaults (agent/src/config/;
# tests/deploy/test_terraform.py checks they stay equal); the ansible role
# binds the same ports on 0.0.0.0.
locals {
  kafka_port   = 9092 # Kafka wire protocol, TCP (--kafka-addr)
  native_port  = 9091 # native protocol: TCP, and QUIC on the same UDP port (--native-addr)
  http_port    = 9001 # /health and /metrics (--http-addr)
  cluster_port = 9093 # QUIC between agents, UDP: metastore, replication, forwarding (--cluster-addr)
}
