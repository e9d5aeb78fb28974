variable "bucket_name" {
  description = "Name of the bucket that holds sealed segments (BUCKET of --object-store gs://BUCKET/PREFIX)."
  type        = string
}

variable "location" {
  description = "Bucket location (a region, dual-region or multi-region), e.g. EUROPE-WEST1."
  type        = string
}

variable "prefix" {
  description = "PREFIX of --object-store gs://BUCKET/PREFIX, without leading or trailing slash; empty for the bucket root."
  type        = string
  default     = "cluster-1"

  validation {
    condition     = !startswith(var.prefix, "/") && !endswith(var.prefix, "/")
    error_message = "prefix must not start or end with a slash."
  }
}

variable "abort_multipart_after_days" {
  description = "Abort XML-API multipart uploads left unfinished by a crashed agent after this many days."
  type        = number
  default     = 2
}

variable "tombstone_expiry_days" {
  description = "Days that objects moved under PREFIX/tombstones/ (--object-store-tombstones true) stay recoverable."
  type        = number
  default     = 7
}

variable "noncurrent_version_days" {
  description = "Days a replaced or deleted object version is kept (versioning is on)."
  type        = number
  default     = 1
}

variable "log_bucket" {
  description = "Bucket that receives this bucket's usage logs."
  type        = string
}

variable "agent_service_account" {
  description = "Email of the service account the agents run as; it gets object read/write on the bucket. Empty: grant nothing."
  type        = string
  default     = ""
}

variable "force_destroy" {
  description = "Let terraform destroy delete a bucket that still holds objects."
  type        = bool
  default     = false
}

variable "labels" {
  description = "Labels of the bucket."
  type        = map(string)
  default     = {}
}
