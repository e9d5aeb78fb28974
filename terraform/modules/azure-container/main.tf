# An Azure Blob container for AeroStream's sealed segments and the lifecycle
# rules the code relies on (key layout: cache/src/layout.rs).
#
# Azure discards the uncommitted blocks of an unfinished upload by itself
# after 7 days, so there is no abort rule. A storage account has exactly one
# management policy: this module owns it, so merge any rules of your own
# into it rather than keeping a second policy resource.

locals {
  key_root = var.prefix == "" ? "" : "${var.prefix}/"
  # TOPICS_DIR, PACKS_DIR and TOMBSTONES_DIR of cache/src/layout.rs
  topics_prefix     = "${local.key_root}topics/"
  packs_prefix      = "${local.key_root}packs/"
  tombstones_prefix = "${local.key_root}tombstones/"
}

resource "azurerm_storage_container" "segments" {
  #checkov:skip=CKV2_AZURE_21:Blob read logging is a setting of the storage account, which this module takes as given (storage_account_id) and does not manage.
  name                  = var.container
  storage_account_id    = var.storage_account_id
  container_access_type = "private"
}

resource "azurerm_storage_management_policy" "segments" {
  storage_account_id = var.storage_account_id

  rule {
    name    = "aerostream-expire-tombstones"
    enabled = true
    filters {
      blob_types = ["blockBlob"]
      # Azure's prefixes start with the container name
      prefix_match = ["${azurerm_storage_container.segments.name}/${local.tombstones_prefix}"]
    }
    actions {
      base_blob {
        delete_after_days_since_modification_greater_than = var.tombstone_expiry_days
      }
      version {
        delete_after_days_since_creation = var.noncurrent_version_days
      }
    }
  }

  rule {
    name    = "aerostream-expire-replaced-versions"
    enabled = true
    filters {
      blob_types = ["blockBlob"]
      # segments and packed objects: every live key of the cluster
      prefix_match = [
        "${azurerm_storage_container.segments.name}/${local.topics_prefix}",
        "${azurerm_storage_container.segments.name}/${local.packs_prefix}",
      ]
    }
    actions {
      version {
        delete_after_days_since_creation = var.noncurrent_version_days
      }
    }
  }
}
