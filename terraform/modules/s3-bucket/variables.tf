variable "bucket_name" {
  description = "Name of the bucket that holds sealed segments (BUCKET of --object-store s3://BUCKET/PREFIX)."
  type        = string
}

variable "prefix" {
  description = "PREFIX of --object-store s3://BUCKET/PREFIX, without leading or trailing slash; empty for the bucket root."
  type        = string
  default     = "cluster-1"

  validation {
    condition     = !startswith(var.prefix, "/") && !endswith(var.prefix, "/")
    error_message = "prefix must not start or end with a slash."
  }
}

variable "abort_multipart_after_days" {
  description = "Abort multipart uploads left unfinished by a crashed agent after this many days."
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

variable "force_destroy" {
  description = "Let terraform destroy delete a bucket that still holds objects (benchmarks, throwaway clusters)."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
