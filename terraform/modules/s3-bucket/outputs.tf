output "bucket" {
  description = "Bucket name."
  value       = aws_s3_bucket.segments.id
}

output "bucket_arn" {
  description = "Bucket ARN."
  value       = aws_s3_bucket.segments.arn
}

output "kms_key_arn" {
  description = "KMS key that encrypts the segments; agents need kms:Decrypt and kms:GenerateDataKey on it."
  value       = aws_kms_key.bucket.arn
}

output "key_root" {
  description = "PREFIX/ (empty for the bucket root): every key AeroStream writes starts with it."
  value       = local.key_root
}

output "object_store_url" {
  description = "The --object-store URL of the agents."
  value       = var.prefix == "" ? "s3://${aws_s3_bucket.segments.id}" : "s3://${aws_s3_bucket.segments.id}/${var.prefix}"
}
