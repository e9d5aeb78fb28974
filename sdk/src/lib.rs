//! sdk crate (placeholder)
