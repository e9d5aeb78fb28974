//! The serialized form of a Protobuf schema: the base64 (standard alphabet)
//! of its file's encoded `FileDescriptorProto`. Serializers that work from
//! compiled descriptors register schemas and their references this way, and
//! ask for it back with `?format=serialized`.
//!
//! Descriptors are handled as prost-reflect dynamic messages rather than as
//! `prost_types` structs so that custom options (extensions of the
//! `*Options` messages, unknown to `prost_types`) survive a decode and an
//! encode.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use prost_reflect::prost::Message as _;
use prost_reflect::prost_types::FileDescriptorProto;
use prost_reflect::{DynamicMessage, FileDescriptor, ReflectMessage as _, Value};
use protox::file::File;

/// A `FileDescriptorProto` decoded from a schema's text.
pub(super) struct Serialized(DynamicMessage);

impl Serialized {
    /// Reads `text` as base64 of an encoded `FileDescriptorProto`: `None`
    /// when it is not base64 at all, an error when the bytes are not a
    /// `FileDescriptorProto`.
    pub(super) fn decode(text: &str) -> Option<Result<Self, String>> {
        let bytes = STANDARD.decode(text.trim()).ok()?;
        let descriptor = FileDescriptorProto::default().descriptor();
        let not_a_descriptor = |why: String| {
            format!(
                "read as base64 it is {} bytes that are not a serialized \
                 FileDescriptorProto ({why})",
                bytes.len()
            )
        };
        let decoded = match DynamicMessage::decode(descriptor, bytes.as_slice()) {
            Ok(message) => Serialized(message),
            Err(e) => return Some(Err(not_a_descriptor(e.to_string()))),
        };
        // Protobuf decoding is lenient (unknown fields are kept), so many
        // byte strings decode; a descriptor always names its file.
        if decoded.name().is_empty() {
            return Some(Err(not_a_descriptor("no file name".into())));
        }
        Some(Ok(decoded))
    }

    /// The name the descriptor gives its own file.
    pub(super) fn name(&self) -> String {
        self.0
            .get_field_by_name("name")
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }

    /// The descriptor as a protox file named `name`: the name it is
    /// imported by (or compiled under) replaces its own, so that the pool's
    /// file and the import that resolved to it agree.
    pub(super) fn into_file(mut self, name: &str) -> Result<File, String> {
        if self.name() != name {
            self.0
                .try_set_field_by_name("name", Value::String(name.to_owned()))
                .map_err(|e| format!("its descriptor cannot be renamed '{name}': {e}"))?;
        }
        File::decode_file_descriptor_proto(self.0.encode_to_vec().as_slice())
            .map_err(|e| format!("its descriptor does not decode again ({e})"))
    }
}

/// The base64 of `file`'s encoded `FileDescriptorProto`, custom options
/// included and source locations (the text's line and column spans, which
/// carry no meaning) left out.
pub(super) fn encode(file: &FileDescriptor) -> String {
    let bytes = file.encode_to_vec();
    let descriptor = FileDescriptorProto::default().descriptor();
    let bytes = match DynamicMessage::decode(descriptor, bytes.as_slice()) {
        Ok(mut message) => {
            message.clear_field_by_name("source_code_info");
            message.encode_to_vec()
        }
        // The pool's own encoding always decodes; were it not to, the
        // locations stay rather than the descriptor being lost.
        Err(_) => bytes,
    };
    STANDARD.encode(bytes)
}

/// A protox error whose text is exactly `message` (protox renders a plain
/// boxed string with quotes).
pub(super) struct Message(pub(super) String);

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Message {}
