output "bucket" {
  description = "Bucket name."
  value       = google_storage_bucket.segments.name
}

output "object_store_url" {
  description = "The --object-store URL of the agents."
  value       = var.prefix == "" ? "gs://${google_storage_bucket.segments.name}" : "gs://${google_storage_bucket.segments.name}/${var.prefix}"
}
