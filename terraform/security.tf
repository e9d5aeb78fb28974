# Who may talk to the agents:
#   clients (allowed_cidrs)   -> 9092/TCP Kafka, 9091/TCP+UDP native (through the
#                                load balancer, which keeps their addresses, or
#                                directly: native clients dial agents themselves)
#   the VPC (load balancer)   -> 9001/TCP health checks
#   other agents only         -> 9093/UDP cluster QUIC (metastore, replication, forwarding)
#   the Instance Connect endpoint -> 22/TCP (ansible, administrators)
# and where the agents may go: S3 (through its gateway endpoint) and each other.

resource "aws_security_group" "agents" {
  name        = "${var.name}-agents"
  description = "AeroStream agents"
  vpc_id      = aws_vpc.main.id
  tags        = { Name = "${var.name}-agents" }
}

resource "aws_security_group" "admin" {
  name        = "${var.name}-admin"
  description = "EC2 Instance Connect endpoint: SSH to the agents"
  vpc_id      = aws_vpc.main.id
  tags        = { Name = "${var.name}-admin" }
}

locals {
  client_rules = merge(
    { for c in var.allowed_cidrs : "kafka-tcp ${c}" => { cidr = c, port = local.kafka_port, protocol = "tcp", what = "Kafka clients" } },
    { for c in var.allowed_cidrs : "native-tcp ${c}" => { cidr = c, port = local.native_port, protocol = "tcp", what = "native clients over TCP" } },
    { for c in var.allowed_cidrs : "native-udp ${c}" => { cidr = c, port = local.native_port, protocol = "udp", what = "native clients over QUIC" } },
  )
}

resource "aws_vpc_security_group_ingress_rule" "clients" {
  for_each          = local.client_rules
  security_group_id = aws_security_group.agents.id
  description       = "${each.value.what} from ${each.value.cidr}"
  cidr_ipv4         = each.value.cidr
  ip_protocol       = each.value.protocol
  from_port         = each.value.port
  to_port           = each.value.port
}

resource "aws_vpc_security_group_ingress_rule" "health" {
  security_group_id = aws_security_group.agents.id
  description       = "load balancer health checks and metrics scrapes from inside the VPC"
  cidr_ipv4         = var.vpc_cidr
  ip_protocol       = "tcp"
  from_port         = local.http_port
  to_port           = local.http_port
}

resource "aws_vpc_security_group_ingress_rule" "cluster" {
  security_group_id            = aws_security_group.agents.id
  description                  = "cluster QUIC between agents only"
  referenced_security_group_id = aws_security_group.agents.id
  ip_protocol                  = "udp"
  from_port                    = local.cluster_port
  to_port                      = local.cluster_port
}

resource "aws_vpc_security_group_egress_rule" "cluster" {
  security_group_id            = aws_security_group.agents.id
  description                  = "cluster QUIC to other agents"
  referenced_security_group_id = aws_security_group.agents.id
  ip_protocol                  = "udp"
  from_port                    = local.cluster_port
  to_port                      = local.cluster_port
}

resource "aws_vpc_security_group_egress_rule" "s3" {
  security_group_id = aws_security_group.agents.id
  description       = "S3 over HTTPS through the gateway endpoint"
  prefix_list_id    = aws_vpc_endpoint.s3.prefix_list_id
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
}

resource "aws_vpc_security_group_ingress_rule" "ssh" {
  #checkov:skip=CKV_AWS_24:The source is the Instance Connect endpoint's security group (referenced_security_group_id), not an address range; the check reads only address ranges and source_security_group_id.
  security_group_id            = aws_security_group.agents.id
  description                  = "SSH through the EC2 Instance Connect endpoint"
  referenced_security_group_id = aws_security_group.admin.id
  ip_protocol                  = "tcp"
  from_port                    = 22
  to_port                      = 22
}

resource "aws_vpc_security_group_egress_rule" "admin_ssh" {
  security_group_id            = aws_security_group.admin.id
  description                  = "SSH to the agents"
  referenced_security_group_id = aws_security_group.agents.id
  ip_protocol                  = "tcp"
  from_port                    = 22
  to_port                      = 22
}
