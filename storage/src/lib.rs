//! storage crate (placeholder)
