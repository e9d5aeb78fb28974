variable "storage_account_id" {
  description = "Resource id of the storage account that holds the container (its settings are yours: network rules, replication, keys)."
  type        = string
}

variable "container" {
  description = "CONTAINER of --object-store az://CONTAINER/PREFIX."
  type        = string
  default     = "aerostream"
}

variable "prefix" {
  description = "PREFIX of --object-store az://CONTAINER/PREFIX, without leading or trailing slash; empty for the container root."
  type        = string
  default     = "cluster-1"

  validation {
    condition     = !startswith(var.prefix, "/") && !endswith(var.prefix, "/")
    error_message = "prefix must not start or end with a slash."
  }
}

variable "tombstone_expiry_days" {
  description = "Days that blobs moved under PREFIX/tombstones/ (--object-store-tombstones true) stay recoverable."
  type        = number
  default     = 7
}

variable "noncurrent_version_days" {
  description = "Days a previous blob version is kept when the account has versioning on."
  type        = number
  default     = 1
}
