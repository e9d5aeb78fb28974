//! The canonical text of a Protobuf schema: its file descriptor rendered
//! back as `.proto` text, in one fixed layout.
//!
//! What the rendering keeps is what carries meaning: the syntax, package,
//! imports, every option set (custom ones included), messages and enums in
//! declaration order (the order of messages matters: serialized records
//! name their message by its index), fields in declaration order with
//! their labels, types, numbers, defaults and options, oneofs, nested
//! types, reserved numbers and names, extensions and services. Comments
//! and whitespace are gone, type names are fully qualified (so `Address`,
//! `pkg.Address` and `.pkg.Address` render alike), imports and options are
//! sorted, and map fields are written as `map<K, V>` rather than as their
//! synthetic entry messages.

use std::fmt::Write;

use prost_reflect::{
    Cardinality, DynamicMessage, EnumDescriptor, ExtensionDescriptor, FieldDescriptor,
    FileDescriptor, Kind, MapKey, MessageDescriptor, ServiceDescriptor, Syntax, Value,
};

/// Renders `file` in the canonical layout.
pub(super) fn render(file: &FileDescriptor) -> String {
    let proto = file.file_descriptor_proto();
    let mut out = String::new();
    let syntax = match file.syntax() {
        Syntax::Proto2 => "proto2",
        Syntax::Proto3 => "proto3",
    };
    line(&mut out, 0, &format!("syntax = \"{syntax}\";"));
    if !file.package_name().is_empty() {
        line(&mut out, 0, &format!("package {};", file.package_name()));
    }

    let mut imports: Vec<String> = proto
        .dependency
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let i = i as i32;
            let modifier = if proto.public_dependency.contains(&i) {
                "public "
            } else if proto.weak_dependency.contains(&i) {
                "weak "
            } else {
                ""
            };
            format!("import {modifier}{};", quote(name.as_bytes()))
        })
        .collect();
    imports.sort();
    for import in imports {
        line(&mut out, 0, &import);
    }
    options(&mut out, 0, &file.options());

    for message in file.messages() {
        render_message(&mut out, 0, &message);
    }
    for enumeration in file.enums() {
        render_enum(&mut out, 0, &enumeration);
    }
    extensions(&mut out, 0, file.extensions());
    for service in file.services() {
        render_service(&mut out, &service);
    }
    out
}

fn line(out: &mut String, depth: usize, text: &str) {
    for _ in 0..depth {
        out.push_str("  ");
    }
    out.push_str(text);
    out.push('\n');
}

fn render_message(out: &mut String, depth: usize, message: &MessageDescriptor) {
    line(out, depth, &format!("message {} {{", message.name()));
    let inner = depth + 1;
    options(out, inner, &message.options());

    // Fields in declaration order; a oneof's fields (declared together) are
    // written in its block where its first field appears.
    let mut oneofs_written = Vec::new();
    for field in message.fields() {
        match field.containing_oneof().filter(|o| !o.is_synthetic()) {
            None => line(out, inner, &field_line(&field, true)),
            Some(oneof) => {
                if oneofs_written.contains(&oneof.name().to_owned()) {
                    continue;
                }
                oneofs_written.push(oneof.name().to_owned());
                line(out, inner, &format!("oneof {} {{", oneof.name()));
                options(out, inner + 1, &oneof.options());
                for member in oneof.fields() {
                    line(out, inner + 1, &field_line(&member, false));
                }
                line(out, inner, "}");
            }
        }
    }

    let reserved: Vec<String> = message
        .reserved_ranges()
        .map(|r| range(r.start as i64, r.end as i64 - 1))
        .collect();
    if !reserved.is_empty() {
        line(out, inner, &format!("reserved {};", reserved.join(", ")));
    }
    let names: Vec<String> = message
        .reserved_names()
        .map(|n| quote(n.as_bytes()))
        .collect();
    if !names.is_empty() {
        line(out, inner, &format!("reserved {};", names.join(", ")));
    }
    let ranges: Vec<String> = message
        .extension_ranges()
        .map(|r| range(r.start as i64, r.end as i64 - 1))
        .collect();
    if !ranges.is_empty() {
        line(out, inner, &format!("extensions {};", ranges.join(", ")));
    }

    for child in message.child_messages().filter(|m| !m.is_map_entry()) {
        render_message(out, inner, &child);
    }
    for child in message.child_enums() {
        render_enum(out, inner, &child);
    }
    extensions(out, inner, message.child_extensions());
    line(out, depth, "}");
}

fn range(start: i64, end: i64) -> String {
    if start == end {
        start.to_string()
    } else {
        format!("{start} to {end}")
    }
}

/// A field's declaration, without indentation: `[label] type name = number
/// [options];`. `with_label` is false inside a oneof (no labels there).
fn field_line(field: &FieldDescriptor, with_label: bool) -> String {
    let proto = field.field_descriptor_proto();
    let label = if field.is_map() || !with_label {
        ""
    } else {
        match field.cardinality() {
            Cardinality::Repeated => "repeated ",
            Cardinality::Required => "required ",
            Cardinality::Optional
                if proto.proto3_optional() || field.parent_file().syntax() == Syntax::Proto2 =>
            {
                "optional "
            }
            Cardinality::Optional => "",
        }
    };
    let mut attributes = Vec::new();
    if let Some(default) = &proto.default_value {
        attributes.push(format!("default = {}", quote(default.as_bytes())));
    }
    if field.json_name() != default_json_name(field.name()) {
        attributes.push(format!(
            "json_name = {}",
            quote(field.json_name().as_bytes())
        ));
    }
    attributes.extend(option_items(&field.options()));
    let attributes = if attributes.is_empty() {
        String::new()
    } else {
        format!(" [{}]", attributes.join(", "))
    };
    format!(
        "{label}{} {} = {}{attributes};",
        type_name(field),
        field.name(),
        field.number()
    )
}

/// The JSON name a field has unless it sets one: its name with each `_`
/// dropped and the letter after it capitalized.
fn default_json_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The type of a field as written: a scalar's keyword, a message's or
/// enum's fully qualified name, `map<K, V>`, or `group` with its message.
fn type_name(field: &FieldDescriptor) -> String {
    if field.is_map() {
        if let Kind::Message(entry) = field.kind() {
            let key = kind_name(&entry.map_entry_key_field().kind());
            let value = kind_name(&entry.map_entry_value_field().kind());
            return format!("map<{key}, {value}>");
        }
    }
    if field.is_group() {
        return format!("group {}", kind_name(&field.kind()));
    }
    kind_name(&field.kind())
}

pub(super) fn kind_name(kind: &Kind) -> String {
    match kind {
        Kind::Double => "double".into(),
        Kind::Float => "float".into(),
        Kind::Int32 => "int32".into(),
        Kind::Int64 => "int64".into(),
        Kind::Uint32 => "uint32".into(),
        Kind::Uint64 => "uint64".into(),
        Kind::Sint32 => "sint32".into(),
        Kind::Sint64 => "sint64".into(),
        Kind::Fixed32 => "fixed32".into(),
        Kind::Fixed64 => "fixed64".into(),
        Kind::Sfixed32 => "sfixed32".into(),
        Kind::Sfixed64 => "sfixed64".into(),
        Kind::Bool => "bool".into(),
        Kind::String => "string".into(),
        Kind::Bytes => "bytes".into(),
        Kind::Message(m) => format!(".{}", m.full_name()),
        Kind::Enum(e) => format!(".{}", e.full_name()),
    }
}

fn render_enum(out: &mut String, depth: usize, enumeration: &EnumDescriptor) {
    line(out, depth, &format!("enum {} {{", enumeration.name()));
    let inner = depth + 1;
    options(out, inner, &enumeration.options());
    for value in enumeration.values() {
        let items = option_items(&value.options());
        let attributes = if items.is_empty() {
            String::new()
        } else {
            format!(" [{}]", items.join(", "))
        };
        line(
            out,
            inner,
            &format!("{} = {}{attributes};", value.name(), value.number()),
        );
    }
    let reserved: Vec<String> = enumeration
        .reserved_ranges()
        .map(|r| range(i64::from(*r.start()), i64::from(*r.end())))
        .collect();
    if !reserved.is_empty() {
        line(out, inner, &format!("reserved {};", reserved.join(", ")));
    }
    let names: Vec<String> = enumeration
        .reserved_names()
        .map(|n| quote(n.as_bytes()))
        .collect();
    if !names.is_empty() {
        line(out, inner, &format!("reserved {};", names.join(", ")));
    }
    line(out, depth, "}");
}

/// `extend` blocks, one per extension, in declaration order.
fn extensions(
    out: &mut String,
    depth: usize,
    extensions: impl Iterator<Item = ExtensionDescriptor>,
) {
    for extension in extensions {
        let proto = extension.field_descriptor_proto();
        let label = match extension.cardinality() {
            Cardinality::Repeated => "repeated ",
            Cardinality::Required => "required ",
            Cardinality::Optional if extension.parent_file().syntax() == Syntax::Proto2 => {
                "optional "
            }
            Cardinality::Optional => "",
        };
        let mut attributes = Vec::new();
        if let Some(default) = &proto.default_value {
            attributes.push(format!("default = {}", quote(default.as_bytes())));
        }
        attributes.extend(option_items(&extension.options()));
        let attributes = if attributes.is_empty() {
            String::new()
        } else {
            format!(" [{}]", attributes.join(", "))
        };
        line(
            out,
            depth,
            &format!(
                "extend .{} {{ {label}{} {} = {}{attributes}; }}",
                extension.containing_message().full_name(),
                kind_name(&extension.kind()),
                extension.name(),
                extension.number()
            ),
        );
    }
}

fn render_service(out: &mut String, service: &ServiceDescriptor) {
    line(out, 0, &format!("service {} {{", service.name()));
    options(out, 1, &service.options());
    for method in service.methods() {
        let stream = |yes: bool| if yes { "stream " } else { "" };
        let items = option_items(&method.options());
        let body = if items.is_empty() {
            ";".to_owned()
        } else {
            let set: Vec<String> = items.iter().map(|o| format!("option {o};")).collect();
            format!(" {{ {} }}", set.join(" "))
        };
        line(
            out,
            1,
            &format!(
                "rpc {}({}.{}) returns ({}.{}){body}",
                method.name(),
                stream(method.is_client_streaming()),
                method.input().full_name(),
                stream(method.is_server_streaming()),
                method.output().full_name()
            ),
        );
    }
    line(out, 0, "}");
}

/// `option name = value;` lines for every option set, sorted.
fn options(out: &mut String, depth: usize, options: &DynamicMessage) {
    for item in option_items(options) {
        line(out, depth, &format!("option {item};"));
    }
}

/// `name = value` for every option set in `options`, custom ones as
/// `(full.name) = value`, sorted so that their order in the file does not
/// matter.
fn option_items(options: &DynamicMessage) -> Vec<String> {
    let mut items: Vec<String> = options
        .fields()
        .map(|(field, value)| format!("{} = {}", field.name(), value_text(&field.kind(), value)))
        .collect();
    items.extend(options.extensions().map(|(extension, value)| {
        format!(
            "({}) = {}",
            extension.full_name(),
            value_text(&extension.kind(), value)
        )
    }));
    items.extend(options.unknown_fields().map(|u| format!("{u:?}")));
    items.sort();
    items
}

/// An option's value, in the text format's spelling.
fn value_text(kind: &Kind, value: &Value) -> String {
    match value {
        Value::Bool(b) => b.to_string(),
        Value::I32(n) => n.to_string(),
        Value::I64(n) => n.to_string(),
        Value::U32(n) => n.to_string(),
        Value::U64(n) => n.to_string(),
        Value::F32(n) => format!("{n:?}"),
        Value::F64(n) => format!("{n:?}"),
        Value::String(s) => quote(s.as_bytes()),
        Value::Bytes(b) => quote(b),
        Value::EnumNumber(n) => match kind.as_enum().and_then(|e| e.get_value(*n)) {
            Some(v) => v.name().to_owned(),
            None => n.to_string(),
        },
        Value::Message(m) => {
            let items = option_items(m);
            format!("{{ {} }}", items.join(" "))
        }
        Value::List(values) => {
            let items: Vec<String> = values.iter().map(|v| value_text(kind, v)).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Map(entries) => {
            let mut items: Vec<String> = entries
                .iter()
                .map(|(k, v)| {
                    let key = match k {
                        MapKey::Bool(b) => b.to_string(),
                        MapKey::I32(n) => n.to_string(),
                        MapKey::I64(n) => n.to_string(),
                        MapKey::U32(n) => n.to_string(),
                        MapKey::U64(n) => n.to_string(),
                        MapKey::String(s) => quote(s.as_bytes()),
                    };
                    let value_kind = map_value_kind(kind).unwrap_or(Kind::Bytes);
                    format!("{{ key: {key} value: {} }}", value_text(&value_kind, v))
                })
                .collect();
            items.sort();
            format!("[{}]", items.join(", "))
        }
    }
}

fn map_value_kind(kind: &Kind) -> Option<Kind> {
    kind.as_message()
        .filter(|m| m.is_map_entry())
        .map(|m| m.map_entry_value_field().kind())
}

/// A string literal in double quotes, escaped as the text format does.
fn quote(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    for &b in bytes {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
    out.push('"');
    out
}
