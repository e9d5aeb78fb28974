# One c6id.2xlarge for the cloud benchmark (run.sh drives it): a throwaway
# VPC with one public subnet, SSH from the runner's address only, the NVMe
# instance store for the brokers' data. Destroyed by run.sh when it ends.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.40, < 7.0"
    }
  }
}

variable "region" {
  description = "AWS region."
  type        = string
}

variable "instance_type" {
  description = "Benchmark host: broker and load generator on separate cores."
  type        = string
  default     = "c6id.2xlarge"
}

variable "runner_cidr" {
  description = "Address of the machine running run.sh (x.x.x.x/32): the only one allowed to SSH in."
  type        = string
}

variable "ssh_public_key" {
  description = "Throwaway OpenSSH public key that run.sh made for this run."
  type        = string
}

variable "run_id" {
  description = "Tag of this run's resources."
  type        = string
}

provider "aws" {
  region = var.region
  default_tags {
    tags = { "aerostream:benchmark" = var.run_id }
  }
}

variable "zone" {
  description = "Availability zone of the host; empty means REGIONa."
  type        = string
  default     = ""
}

data "aws_availability_zones" "chosen" {
  state = "available"
  filter {
    name   = "zone-name"
    values = [var.zone == "" ? "${var.region}a" : var.zone]
  }
}

data "aws_ssm_parameter" "ubuntu" {
  name = "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id"
}

resource "aws_vpc" "bench" {
  #checkov:skip=CKV2_AWS_11:The VPC lives for one benchmark run of about an hour and carries only the runner's SSH session and package downloads.
  cidr_block           = "10.99.0.0/24"
  enable_dns_support   = true
  enable_dns_hostnames = true
}

resource "aws_default_security_group" "bench" {
  vpc_id = aws_vpc.bench.id
}

resource "aws_subnet" "bench" {
  vpc_id            = aws_vpc.bench.id
  cidr_block        = "10.99.0.0/24"
  availability_zone = data.aws_availability_zones.chosen.names[0]
}

resource "aws_internet_gateway" "bench" {
  vpc_id = aws_vpc.bench.id
}

resource "aws_route_table" "bench" {
  vpc_id = aws_vpc.bench.id
  route {
    cidr_block = "0.0.0.0/0"
    gateway_id = aws_internet_gateway.bench.id
  }
}

resource "aws_route_table_association" "bench" {
  subnet_id      = aws_subnet.bench.id
  route_table_id = aws_route_table.bench.id
}

resource "aws_security_group" "bench" {
  name        = "aerostream-bench-${var.run_id}"
  description = "AeroStream benchmark host: SSH from the runner, HTTPS out for packages and crates"
  vpc_id      = aws_vpc.bench.id

  ingress {
    description = "SSH from the machine running the benchmark"
    protocol    = "tcp"
    from_port   = 22
    to_port     = 22
    cidr_blocks = [var.runner_cidr]
  }

  egress {
    description = "HTTPS: Debian/Ubuntu packages, rustup, crates.io"
    protocol    = "tcp"
    from_port   = 443
    to_port     = 443
    cidr_blocks = ["0.0.0.0/0"]
  }

  egress {
    description = "HTTP: Ubuntu's package mirrors"
    protocol    = "tcp"
    from_port   = 80
    to_port     = 80
    cidr_blocks = ["0.0.0.0/0"]
  }
}

resource "aws_key_pair" "bench" {
  key_name   = "aerostream-bench-${var.run_id}"
  public_key = var.ssh_public_key
}

resource "aws_instance" "bench" {
  #checkov:skip=CKV_AWS_88:The runner reaches this short-lived host over SSH from its own address only (security group above); no other port is open.
  #checkov:skip=CKV2_AWS_41:The benchmark uses no AWS API from the host (data stays on the instance store), so it gets no IAM role.
  ami                         = data.aws_ssm_parameter.ubuntu.value
  instance_type               = var.instance_type
  subnet_id                   = aws_subnet.bench.id
  vpc_security_group_ids      = [aws_security_group.bench.id]
  key_name                    = aws_key_pair.bench.key_name
  associate_public_ip_address = true
  ebs_optimized               = true
  monitoring                  = true

  metadata_options {
    http_endpoint = "enabled"
    http_tokens   = "required"
  }

  root_block_device {
    volume_type = "gp3"
    volume_size = 40
    encrypted   = true
  }

  tags = { Name = "aerostream-bench-${var.run_id}" }
}

output "host" {
  description = "Public address of the benchmark host."
  value       = aws_instance.bench.public_ip
}
