# The bucket that holds AeroStream's sealed segments, and the lifecycle rules
# the code relies on (cache/src/layout.rs has the key layout):
#
#   PREFIX/topics/{topic-id}/{partition}/{base:020}-{last:020}.{seg,idx,tix}
#   PREFIX/packs/{upload-ms:013}-{random}.pack   segments of many partitions
#   PREFIX/tombstones/{topics,packs}/...  deleted objects, expired by a rule below
#
# Keys are written once and never modified, so versioning only ever keeps
# copies of deleted or re-uploaded objects: they expire after a day.

locals {
  key_root = var.prefix == "" ? "" : "${var.prefix}/"
  # TOPICS_DIR, PACKS_DIR and TOMBSTONES_DIR of cache/src/layout.rs
  topics_prefix     = "${local.key_root}topics/"
  packs_prefix      = "${local.key_root}packs/"
  tombstones_prefix = "${local.key_root}tombstones/"
}

data "aws_caller_identity" "current" {}

resource "aws_kms_key" "bucket" {
  description             = "AeroStream segments in ${var.bucket_name}"
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
  tags = var.tags
}

resource "aws_s3_bucket" "segments" {
  #checkov:skip=CKV_AWS_18:Server access logs would need a second bucket per cluster; use CloudTrail S3 data events where an audit trail is required.
  #checkov:skip=CKV_AWS_144:Cross-region replication doubles storage and request cost; S3 already keeps every object in several zones.
  #checkov:skip=CKV2_AWS_62:AeroStream consumes no bucket event notifications; the metastore is the record of what was written.
  bucket        = var.bucket_name
  force_destroy = var.force_destroy
  tags          = var.tags
}

resource "aws_s3_bucket_public_access_block" "segments" {
  bucket                  = aws_s3_bucket.segments.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "segments" {
  bucket = aws_s3_bucket.segments.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_versioning" "segments" {
  bucket = aws_s3_bucket.segments.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "segments" {
  bucket = aws_s3_bucket.segments.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = "aws:kms"
      kms_master_key_id = aws_kms_key.bucket.arn
    }
    # one KMS request per bucket key, not per object: keeps KMS out of the
    # per-segment request bill
    bucket_key_enabled = true
  }
}

resource "aws_s3_bucket_policy" "tls_only" {
  bucket = aws_s3_bucket.segments.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "DenyPlainHttp"
      Effect    = "Deny"
      Principal = "*"
      Action    = "s3:*"
      Resource  = [aws_s3_bucket.segments.arn, "${aws_s3_bucket.segments.arn}/*"]
      Condition = { Bool = { "aws:SecureTransport" = "false" } }
    }]
  })
  depends_on = [aws_s3_bucket_public_access_block.segments]
}

resource "aws_s3_bucket_lifecycle_configuration" "segments" {
  bucket     = aws_s3_bucket.segments.id
  depends_on = [aws_s3_bucket_versioning.segments]

  # A crashed agent leaves its multipart upload unfinished: invisible, but
  # billed. The bucket is AeroStream's, so the rule covers all of it (every
  # cluster sharing it under another prefix needs the same).
  rule {
    id     = "aerostream-abort-incomplete-multipart-uploads"
    status = "Enabled"
    filter {}
    abort_incomplete_multipart_upload {
      days_after_initiation = var.abort_multipart_after_days
    }
  }

  # Retention and topic deletion move objects here with --object-store-tombstones true.
  rule {
    id     = "aerostream-expire-tombstones"
    status = "Enabled"
    filter {
      prefix = local.tombstones_prefix
    }
    expiration {
      days = var.tombstone_expiry_days
    }
    noncurrent_version_expiration {
      noncurrent_days = var.noncurrent_version_days
    }
  }

  # A deletion under versioning leaves a billed noncurrent copy and a delete
  # marker: segments under topics/ and packed objects under packs/ alike, so
  # the rule covers every key of the cluster.
  rule {
    id     = "aerostream-expire-replaced-versions"
    status = "Enabled"
    filter {
      prefix = local.key_root
    }
    noncurrent_version_expiration {
      noncurrent_days = var.noncurrent_version_days
    }
    expiration {
      expired_object_delete_marker = true
    }
  }
}
