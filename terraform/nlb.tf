# One network load balancer in front of every agent: Kafka on 9092/TCP (the
# agents run with --load-balanced and advertise it), the native protocol on
# 9091 for TCP and QUIC (UDP). Both target groups check each agent's
# /health on 9001, which answers 503 while the agent stops, so a rolling
# restart drains it first.

resource "aws_lb" "main" {
  #checkov:skip=CKV_AWS_91:A network load balancer writes access logs for TLS listeners only; these listeners are TCP and TCP_UDP (the agents' own metrics count connections).
  name                             = "${var.name}-nlb"
  load_balancer_type               = "network"
  internal                         = var.internal_load_balancer
  subnets                          = var.internal_load_balancer ? aws_subnet.private[*].id : aws_subnet.public[*].id
  enable_cross_zone_load_balancing = true
  enable_deletion_protection       = var.deletion_protection
}

resource "aws_lb_target_group" "kafka" {
  name                 = "${var.name}-kafka"
  port                 = local.kafka_port
  protocol             = "TCP"
  vpc_id               = aws_vpc.main.id
  target_type          = "instance"
  deregistration_delay = 30

  health_check {
    protocol            = "HTTP"
    port                = tostring(local.http_port)
    path                = "/health"
    matcher             = "200"
    interval            = 10
    healthy_threshold   = 2
    unhealthy_threshold = 2
  }
}

resource "aws_lb_target_group" "native" {
  name                 = "${var.name}-native"
  port                 = local.native_port
  protocol             = "TCP_UDP"
  vpc_id               = aws_vpc.main.id
  target_type          = "instance"
  deregistration_delay = 30

  health_check {
    protocol            = "HTTP"
    port                = tostring(local.http_port)
    path                = "/health"
    matcher             = "200"
    interval            = 10
    healthy_threshold   = 2
    unhealthy_threshold = 2
  }
}

resource "aws_lb_listener" "kafka" {
  load_balancer_arn = aws_lb.main.arn
  port              = local.kafka_port
  protocol          = "TCP"
  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.kafka.arn
  }
}

resource "aws_lb_listener" "native" {
  load_balancer_arn = aws_lb.main.arn
  port              = local.native_port
  protocol          = "TCP_UDP"
  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.native.arn
  }
}

resource "aws_lb_target_group_attachment" "kafka" {
  count            = var.agent_count
  target_group_arn = aws_lb_target_group.kafka.arn
  target_id        = aws_instance.agent[count.index].id
  port             = local.kafka_port
}

resource "aws_lb_target_group_attachment" "native" {
  count            = var.agent_count
  target_group_arn = aws_lb_target_group.native.arn
  target_id        = aws_instance.agent[count.index].id
  port             = local.native_port
}
