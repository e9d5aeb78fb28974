output "kafka_bootstrap" {
  description = "Kafka clients' bootstrap.servers: the load balancer."
  value       = "${aws_lb.main.dns_name}:${local.kafka_port}"
}

output "native_bootstrap" {
  description = "Native SDK bootstrap over TCP (the load balancer); native clients then dial each partition's agent at its private address."
  value       = "aero://${aws_lb.main.dns_name}:${local.native_port}"
}

output "native_quic_bootstrap" {
  description = "Native SDK bootstrap over QUIC (UDP, the same port)."
  value       = "aero+quic://${aws_lb.main.dns_name}:${local.native_port}"
}

output "bucket" {
  description = "The bucket of sealed segments."
  value       = module.bucket.bucket
}

output "object_store_url" {
  description = "The agents' --object-store."
  value       = module.bucket.object_store_url
}

output "agents" {
  description = "Every agent: node id, instance id, private address, zone (its rack)."
  value = [for i, a in aws_instance.agent : {
    node_id     = i + 1
    instance_id = a.id
    private_ip  = a.private_ip
    rack        = local.zones[i % 3]
  }]
}

output "voters" {
  description = "The agents' --voters."
  value       = join(",", [for i in range(local.voter_count) : "${i + 1}@${aws_instance.agent[i].private_ip}:${local.cluster_port}"])
}

output "admin_user" {
  description = "The admin user (SCRAM, superuser) for Kafka clients, the native SDK, the REST API and the console."
  value       = var.admin_user
}

output "admin_password_parameter" {
  description = "SSM SecureString parameter holding the admin user's password (aws ssm get-parameter --with-decryption --name ...)."
  value       = aws_ssm_parameter.admin_password.name
}

output "admin_password" {
  description = "The admin user's password (terraform output -raw admin_password)."
  value       = random_password.admin.result
  sensitive   = true
}

# `terraform output -raw ansible_inventory > ../ansible/inventory/aws.yml`
output "ansible_inventory" {
  description = "Ansible inventory of the agents (YAML), reached over SSH through the EC2 Instance Connect endpoint."
  value = yamlencode({
    aerostream_agents = {
      hosts = { for i, a in aws_instance.agent : "agent-${i + 1}" => {
        ansible_host          = a.id
        aerostream_node_id    = i + 1
        aerostream_private_ip = a.private_ip
        aerostream_rack       = local.zones[i % 3]
      } }
      vars = {
        ansible_user                = "ubuntu"
        ansible_ssh_common_args     = "-o StrictHostKeyChecking=accept-new -o ProxyCommand='aws ec2-instance-connect open-tunnel --region ${var.region} --instance-id %h'"
        aerostream_voters           = [for i in range(local.voter_count) : "${i + 1}@${aws_instance.agent[i].private_ip}:${local.cluster_port}"]
        aerostream_load_balanced    = true
        aerostream_advertised_kafka = "${aws_lb.main.dns_name}:${local.kafka_port}"
        aerostream_object_store     = module.bucket.object_store_url
        aerostream_environment      = { AWS_REGION = var.region }
        # each instance wrote /etc/aerostream/admin.env at first boot (admin.tf)
        aerostream_admin_password_source = "instance"
        aerostream_admin_user            = var.admin_user
      }
    }
  })
}
