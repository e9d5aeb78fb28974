variable "name" {
  description = "Name of the cluster; prefixes every resource name and tags everything."
  type        = string
  default     = "aerostream"
}

variable "region" {
  description = "AWS region."
  type        = string
  default     = "eu-west-1"
}

variable "zones" {
  description = "Three availability zones of the region; empty means REGIONa, REGIONb and REGIONc."
  type        = list(string)
  default     = []

  validation {
    condition     = length(var.zones) == 0 || length(var.zones) == 3
    error_message = "zones must name exactly three availability zones, or none."
  }
}

variable "vpc_cidr" {
  description = "Address range of the VPC; split into three public and three private /20s."
  type        = string
  default     = "10.42.0.0/16"
}

variable "agent_count" {
  description = "Agents, spread round-robin over the zones. The first 1, 3 or 5 (as many as there are, up to 5, odd) are metastore voters."
  type        = number
  default     = 3

  validation {
    condition     = var.agent_count >= 1
    error_message = "agent_count must be at least 1."
  }
}

variable "instance_type" {
  description = "Agent instance type: a type with NVMe instance store, which holds the partition logs."
  type        = string
  default     = "c6id.2xlarge"
}

variable "root_volume_gb" {
  description = "Encrypted gp3 root volume (the metastore and certificates live here, so they survive a stop and start)."
  type        = number
  default     = 30
}

variable "bucket_name" {
  description = "S3 bucket created for sealed segments (globally unique)."
  type        = string
}

variable "object_store_prefix" {
  description = "Key prefix of this cluster in the bucket (PREFIX of s3://BUCKET/PREFIX), without slashes; empty for the bucket root."
  type        = string
  default     = "cluster-1"
}

variable "tombstone_expiry_days" {
  description = "Days that deleted segments moved under PREFIX/tombstones/ stay recoverable."
  type        = number
  default     = 7
}

variable "abort_multipart_after_days" {
  description = "Abort multipart uploads left unfinished by a crashed agent after this many days."
  type        = number
  default     = 2
}

variable "force_destroy_bucket" {
  description = "Let terraform destroy delete the bucket with its objects (benchmarks, throwaway clusters)."
  type        = bool
  default     = false
}

variable "allowed_cidrs" {
  description = "Client address ranges allowed to reach Kafka (9092/TCP) and the native protocol (9091/TCP and UDP). The load balancer keeps client addresses, so this is enforced on the agents."
  type        = list(string)

  validation {
    condition     = alltrue([for c in var.allowed_cidrs : can(cidrhost(c, 0))])
    error_message = "allowed_cidrs must be CIDR blocks such as 203.0.113.0/24."
  }
}

variable "internal_load_balancer" {
  description = "Make the load balancer internal (reachable only from the VPC and networks joined to it)."
  type        = bool
  default     = false
}

variable "ssh_public_key" {
  description = "OpenSSH public key installed for the 'ubuntu' user; ansible connects with it through the EC2 Instance Connect endpoint."
  type        = string
}

variable "flow_log_retention_days" {
  description = "Days VPC flow logs are kept in CloudWatch Logs."
  type        = number
  default     = 365
}

variable "tags" {
  description = "Extra tags for every resource."
  type        = map(string)
  default     = {}
}

variable "deletion_protection" {
  description = "Protect the load balancer from deletion (turn off before terraform destroy)."
  type        = bool
  default     = true
}

variable "admin_user" {
  description = "Name of the admin user (a superuser) every agent creates at its first start; its password is generated and kept in SSM Parameter Store (output admin_password_parameter)."
  type        = string
  default     = "admin"

  validation {
    condition     = can(regex("^[A-Za-z0-9._-]+$", var.admin_user))
    error_message = "admin_user may hold letters, digits, '.', '_' and '-' only."
  }
}
