output "container" {
  description = "Container name."
  value       = azurerm_storage_container.segments.name
}

output "object_store_url" {
  description = "The --object-store URL of the agents (with AZURE_STORAGE_ACCOUNT_NAME set to the account)."
  value       = var.prefix == "" ? "az://${azurerm_storage_container.segments.name}" : "az://${azurerm_storage_container.segments.name}/${var.prefix}"
}
