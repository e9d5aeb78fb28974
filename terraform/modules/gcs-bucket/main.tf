# A GCS bucket for AeroStream's sealed segments with the lifecycle rules the
# code relies on (key layout: cache/src/layout.rs). AeroStream deletes
# directly on GCS unless --object-store-tombstones is on; the tombstone rule
# covers that case.

locals {
  key_root = var.prefix == "" ? "" : "${var.prefix}/"
  # TOPICS_DIR, PACKS_DIR and TOMBSTONES_DIR of cache/src/layout.rs
  topics_prefix     = "${local.key_root}topics/"
  packs_prefix      = "${local.key_root}packs/"
  tombstones_prefix = "${local.key_root}tombstones/"
}

resource "google_storage_bucket" "segments" {
  name                        = var.bucket_name
  location                    = var.location
  force_destroy               = var.force_destroy
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = var.labels

  versioning {
    enabled = true
  }

  logging {
    log_bucket = var.log_bucket
  }

  # Parts of an XML-API multipart upload a crashed agent never completed;
  # the bucket is AeroStream's, so the rule covers all of it.
  lifecycle_rule {
    action {
      type = "AbortIncompleteMultipartUpload"
    }
    condition {
      age = var.abort_multipart_after_days
    }
  }

  lifecycle_rule {
    action {
      type = "Delete"
    }
    condition {
      age            = var.tombstone_expiry_days
      matches_prefix = [local.tombstones_prefix]
    }
  }

  # Versions replaced or deleted under versioning.
  lifecycle_rule {
    action {
      type = "Delete"
    }
    condition {
      with_state                 = "ARCHIVED"
      days_since_noncurrent_time = var.noncurrent_version_days
      matches_prefix             = [local.key_root]
    }
  }
}

# Read, write and delete objects; no bucket administration. A condition on
# the object name keeps the agents inside their prefix.
resource "google_storage_bucket_iam_member" "agents" {
  count  = var.agent_service_account == "" ? 0 : 1
  bucket = google_storage_bucket.segments.name
  role   = "roles/storage.objectUser"
  member = "serviceAccount:${var.agent_service_account}"

  condition {
    title       = "aerostream-prefix"
    description = "Only objects under the cluster's prefix"
    expression  = "resource.name.startsWith(\"projects/_/buckets/${google_storage_bucket.segments.name}/objects/${local.key_root}\") || resource.type == \"storage.googleapis.com/Bucket\""
  }
}
