# The admin user every agent creates at its first start (a superuser; Kafka
# clients, native clients, the REST API and the console log in with SCRAM
# users). Its password is generated here and kept in SSM Parameter Store
# as a SecureString under a key of its own; each agent reads it at its first
# boot (boot/admin-credential.py.tftpl, the instance's user data) into
# /etc/aerostream/admin.env, root only, which its unit reads. The operator
# reads it with
#   aws ssm get-parameter --with-decryption --query Parameter.Value --output text \
#     --name "$(terraform output -raw admin_password_parameter)"
# (or `terraform output -raw admin_password`; the state holds it too, as it
# holds every generated secret: keep the state private).

resource "random_password" "admin" {
  length  = 32
  special = false
}

resource "aws_kms_key" "secrets" {
  description             = "${var.name} admin password"
  enable_key_rotation     = true
  deletion_window_in_days = 30
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "AccountAdministersTheKey"
      Effect    = "Allow"
      Principal = { AWS = "arn:aws:iam::${data.aws_caller_identity.current.account_id}:root" }
      Action    = "kms:*"
      Resource  = "*"
    }]
  })
}

resource "aws_ssm_parameter" "admin_password" {
  name        = "/${var.name}/admin-password"
  description = "Password of the AeroStream admin user '${var.admin_user}' (SCRAM, superuser)"
  type        = "SecureString"
  key_id      = aws_kms_key.secrets.arn
  value       = random_password.admin.result
}

# The agents may read that one parameter, decrypted through SSM only.
resource "aws_iam_role_policy" "agent_admin_password" {
  name = "aerostream-admin-password"
  role = aws_iam_role.agent.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid      = "ReadTheAdminPassword"
        Effect   = "Allow"
        Action   = ["ssm:GetParameter"]
        Resource = aws_ssm_parameter.admin_password.arn
      },
      {
        Sid      = "DecryptItThroughSsm"
        Effect   = "Allow"
        Action   = ["kms:Decrypt"]
        Resource = aws_kms_key.secrets.arn
        Condition = {
          StringEquals = { "kms:ViaService" = "ssm.${data.aws_region.current.name}.amazonaws.com" }
        }
      },
    ]
  })
}

# The agents have no internet access: SSM through an interface endpoint.
resource "aws_security_group" "endpoints" {
  name        = "${var.name}-endpoints"
  description = "Interface endpoints the agents use (SSM)"
  vpc_id      = aws_vpc.main.id
  tags        = { Name = "${var.name}-endpoints" }
}

resource "aws_vpc_security_group_ingress_rule" "endpoints_https" {
  security_group_id            = aws_security_group.endpoints.id
  description                  = "HTTPS from the agents"
  referenced_security_group_id = aws_security_group.agents.id
  ip_protocol                  = "tcp"
  from_port                    = 443
  to_port                      = 443
}

resource "aws_vpc_security_group_egress_rule" "agents_endpoints" {
  security_group_id            = aws_security_group.agents.id
  description                  = "HTTPS to the interface endpoints (SSM)"
  referenced_security_group_id = aws_security_group.endpoints.id
  ip_protocol                  = "tcp"
  from_port                    = 443
  to_port                      = 443
}

resource "aws_vpc_endpoint" "ssm" {
  vpc_id              = aws_vpc.main.id
  service_name        = "com.amazonaws.${data.aws_region.current.name}.ssm"
  vpc_endpoint_type   = "Interface"
  subnet_ids          = aws_subnet.private[*].id
  security_group_ids  = [aws_security_group.endpoints.id]
  private_dns_enabled = true
  tags                = { Name = "${var.name}-ssm" }
}
