//! gateway crate (placeholder)
