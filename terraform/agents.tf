# A fixed set of agents, spread round-robin over the three zones. Node ids
# are stable (index + 1), so voters and the ansible inventory follow from
# the count; an auto-scaling group would hand out new addresses and ids.
#
# Each agent's partition logs go on its NVMe instance store (ansible formats
# and mounts it); the metastore and certificates stay on the encrypted root
# volume, which survives a stop and start, unlike the instance store.

data "aws_ssm_parameter" "ubuntu" {
  name = "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id"
}

resource "aws_key_pair" "admin" {
  key_name   = "${var.name}-admin"
  public_key = var.ssh_public_key
}

locals {
  voter_count = min(var.agent_count >= 5 ? 5 : (var.agent_count >= 3 ? 3 : 1), var.agent_count)
}

resource "aws_instance" "agent" {
  count                  = var.agent_count
  ami                    = data.aws_ssm_parameter.ubuntu.value
  instance_type          = var.instance_type
  subnet_id              = aws_subnet.private[count.index % 3].id
  vpc_security_group_ids = [aws_security_group.agents.id]
  iam_instance_profile   = aws_iam_instance_profile.agent.name
  key_name               = aws_key_pair.admin.key_name
  ebs_optimized          = true
  monitoring             = true

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  root_block_device {
    volume_type           = "gp3"
    volume_size           = var.root_volume_gb
    encrypted             = true
    delete_on_termination = true
  }

  # first boot: the admin password from SSM into /etc/aerostream/admin.env (admin.tf)
  user_data = templatefile("${path.module}/boot/admin-credential.py.tftpl", {
    parameter  = aws_ssm_parameter.admin_password.name
    region     = data.aws_region.current.name
    admin_user = var.admin_user
  })
  depends_on = [aws_vpc_endpoint.ssm, aws_iam_role_policy.agent_admin_password]

  tags = {
    Name                 = "${var.name}-agent-${count.index + 1}"
    "aerostream:node-id" = tostring(count.index + 1)
    "aerostream:rack"    = local.zones[count.index % 3]
  }

  lifecycle {
    # a new Ubuntu image must not replace running agents, nor a changed
    # first-boot script stop them all at once (it runs at first boot only)
    ignore_changes = [ami, user_data]
  }
}
