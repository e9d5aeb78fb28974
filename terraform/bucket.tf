module "bucket" {
  source                     = "./modules/s3-bucket"
  bucket_name                = var.bucket_name
  prefix                     = var.object_store_prefix
  tombstone_expiry_days      = var.tombstone_expiry_days
  abort_multipart_after_days = var.abort_multipart_after_days
  force_destroy              = var.force_destroy_bucket
}

# The agents' role: objects under the cluster's prefix, nothing else.
resource "aws_iam_role" "agent" {
  name = "${var.name}-agent"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "ec2.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })
}

resource "aws_iam_role_policy" "agent_objects" {
  name = "aerostream-objects"
  role = aws_iam_role.agent.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid      = "ListOwnPrefix"
        Effect   = "Allow"
        Action   = ["s3:ListBucket", "s3:ListBucketMultipartUploads"]
        Resource = module.bucket.bucket_arn
        Condition = {
          StringLike = { "s3:prefix" = ["${module.bucket.key_root}*"] }
        }
      },
      {
        # the start-up check that the lifecycle rules the agent relies on
        # are in place (reading only; installing them is the operator's
        # `aerostream bucket check --apply`, or this module's own rules)
        Sid      = "ReadLifecycleRules"
        Effect   = "Allow"
        Action   = ["s3:GetLifecycleConfiguration"]
        Resource = module.bucket.bucket_arn
      },
      {
        # uploads (multipart included), cold reads, retention deletes and
        # tombstone moves (a copy then a delete)
        Sid    = "ReadWriteOwnObjects"
        Effect = "Allow"
        Action = [
          "s3:GetObject",
          "s3:PutObject",
          "s3:DeleteObject",
          "s3:AbortMultipartUpload",
          "s3:ListMultipartUploadParts",
        ]
        Resource = "${module.bucket.bucket_arn}/${module.bucket.key_root}*"
      },
      {
        Sid      = "UseTheBucketKey"
        Effect   = "Allow"
        Action   = ["kms:Decrypt", "kms:GenerateDataKey"]
        Resource = module.bucket.kms_key_arn
      },
    ]
  })
}

resource "aws_iam_instance_profile" "agent" {
  name = "${var.name}-agent"
  role = aws_iam_role.agent.name
}
