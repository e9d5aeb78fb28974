//! cache crate (placeholder)
