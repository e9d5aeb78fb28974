//! metastore crate (placeholder)
