//! PLACEHOLDER: replaced by the protobuf format's implementation.

use crate::{Resolved, SchemaError};

#[derive(Debug, Clone)]
pub struct ProtobufSchema {
    canonical: String,
}

impl ProtobufSchema {
    pub fn canonical(&self) -> &str {
        &self.canonical
    }
}

pub fn parse(_text: &str, _references: &[Resolved]) -> Result<ProtobufSchema, SchemaError> {
    Err(SchemaError::Invalid("not yet supported".into()))
}

pub fn cannot_read(_reader: &ProtobufSchema, _writer: &ProtobufSchema) -> Vec<String> {
    vec!["not yet supported".into()]
}
