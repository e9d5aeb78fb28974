//! The source's record format and the keys that belong to it: `registry`
//! (`avro`), `layout` and `endian` (`fixed`). A fixed layout is checked
//! against every field the pipeline reads, so a typo in a field name or a
//! text field summed is refused at start, not found in empty output.

use serde::Deserialize;

use super::{invalid, Format, Pipeline, PipelineError, Scalar};

/// The longest fixed-width string field, in bytes.
pub const MAX_STR_WIDTH: usize = 4096;

/// One field of a fixed layout.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutField {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: FieldType,
}

/// A fixed layout field's type: integers and floats of the `endian` byte
/// order, or `str:N`, N bytes of UTF-8 padded with NULs or spaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum FieldType {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
    Str(usize),
}

/// The byte order of a fixed layout's numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Endian {
    #[default]
    Little,
    Big,
}

impl FieldType {
    /// How many bytes the field takes.
    pub fn width(self) -> usize {
        match self {
            FieldType::I8 | FieldType::U8 => 1,
            FieldType::I16 | FieldType::U16 => 2,
            FieldType::I32 | FieldType::U32 | FieldType::F32 => 4,
            FieldType::I64 | FieldType::U64 | FieldType::F64 => 8,
            FieldType::Str(n) => n,
        }
    }

    pub fn is_integer(self) -> bool {
        !matches!(self, FieldType::F32 | FieldType::F64 | FieldType::Str(_))
    }

    pub fn is_text(self) -> bool {
        matches!(self, FieldType::Str(_))
    }

    pub fn name(self) -> String {
        match self {
            FieldType::I8 => "i8".into(),
            FieldType::I16 => "i16".into(),
            FieldType::I32 => "i32".into(),
            FieldType::I64 => "i64".into(),
            FieldType::U8 => "u8".into(),
            FieldType::U16 => "u16".into(),
            FieldType::U32 => "u32".into(),
            FieldType::U64 => "u64".into(),
            FieldType::F32 => "f32".into(),
            FieldType::F64 => "f64".into(),
            FieldType::Str(n) => format!("str:{n}"),
        }
    }
}

impl TryFrom<String> for FieldType {
    type Error = String;

    fn try_from(text: String) -> Result<FieldType, String> {
        let t = match text.trim() {
            "i8" => FieldType::I8,
            "i16" => FieldType::I16,
            "i32" => FieldType::I32,
            "i64" => FieldType::I64,
            "u8" => FieldType::U8,
            "u16" => FieldType::U16,
            "u32" => FieldType::U32,
            "u64" => FieldType::U64,
            "f32" => FieldType::F32,
            "f64" => FieldType::F64,
            other => {
                let width = other.strip_prefix("str:").map(str::parse::<usize>);
                match width {
                    Some(Ok(n)) if (1..=MAX_STR_WIDTH).contains(&n) => FieldType::Str(n),
                    Some(_) => {
                        return Err(format!(
                            "{text:?}: a string's width is a whole number of bytes from 1 to \
                             {MAX_STR_WIDTH}, e.g. str:8"
                        ))
                    }
                    None => {
                        return Err(format!(
                            "unknown field type {text:?}: expected i8, i16, i32, i64, u8, u16, \
                             u32, u64, f32, f64 or str:N"
                        ))
                    }
                }
            }
        };
        Ok(t)
    }
}

/// Checks the format's own keys, and a fixed layout against the fields
/// the pipeline reads.
pub(super) fn validate(p: &Pipeline) -> Result<(), PipelineError> {
    let s = &p.source;
    let format = s.format.name();
    match (s.format, &s.registry) {
        (Format::Avro, None) => {
            return Err(invalid(
                "source.registry",
                "format: avro needs the schema registry's URL, e.g. \"http://127.0.0.1:8081\"",
            ))
        }
        (Format::Avro, Some(url)) => check_registry_url(url)?,
        (_, Some(_)) => {
            return Err(invalid(
                "source.registry",
                format!("only format: avro takes a registry, not format: {format}"),
            ))
        }
        (_, None) => {}
    }
    if s.format != Format::Fixed {
        if s.layout.is_some() {
            return Err(invalid(
                "source.layout",
                format!("only format: fixed takes a layout, not format: {format}"),
            ));
        }
        if s.endian.is_some() {
            return Err(invalid(
                "source.endian",
                format!("only format: fixed takes endian, not format: {format}"),
            ));
        }
        return Ok(());
    }
    let Some(layout) = &s.layout else {
        return Err(invalid(
            "source.layout",
            "format: fixed needs the layout of its values: a list of {name, type}",
        ));
    };
    if layout.is_empty() {
        return Err(invalid("source.layout", "needs at least one field"));
    }
    for (i, f) in layout.iter().enumerate() {
        if f.name.trim().is_empty() {
            return Err(invalid(
                &format!("source.layout[{i}].name"),
                "must name the field",
            ));
        }
        if layout[..i].iter().any(|g| g.name == f.name) {
            return Err(invalid(
                &format!("source.layout[{i}].name"),
                format!("{:?} is used twice", f.name),
            ));
        }
    }
    let kind = |name: &str| layout.iter().find(|f| f.name == name).map(|f| f.kind);

    // every field the pipeline reads, and what reads it
    let mut read: Vec<(&str, &str)> = vec![(&s.event_time, "source.event_time")];
    if let Some(k) = &s.key {
        read.push((k, "source.key"));
    }
    let values = p.value_fields();
    let distinct = p.distinct_fields();
    read.extend(values.iter().map(|f| (f.as_str(), "aggregates")));
    read.extend(distinct.iter().map(|f| (f.as_str(), "aggregates")));
    read.extend(p.filter_conditions().map(|c| (c.field.as_str(), "filter")));
    let mut missing: Vec<String> = Vec::new();
    for (field, by) in &read {
        let named = format!("{field:?} ({by})");
        if kind(field).is_none() && !missing.contains(&named) {
            missing.push(named);
        }
    }
    if !missing.is_empty() {
        return Err(invalid(
            "source.layout",
            format!("has no field {}", missing.join(", ")),
        ));
    }

    if let Some(t) = kind(&s.event_time).filter(|t| !t.is_integer()) {
        return Err(invalid(
            "source.event_time",
            format!(
                "{:?} is {} in the layout; the event time must be an integer \
                 (milliseconds since the epoch)",
                s.event_time,
                t.name()
            ),
        ));
    }
    for f in &values {
        if let Some(t) = kind(f).filter(|t| t.is_text()) {
            return Err(invalid(
                "aggregates",
                format!(
                    "{f:?} is {} in the layout; the aggregates read it as a number",
                    t.name()
                ),
            ));
        }
    }
    for c in p.filter_conditions() {
        let compares_number = c.operands().iter().any(|v| matches!(v, Scalar::Number(_)));
        if let Some(t) = kind(&c.field).filter(|t| t.is_text() && compares_number) {
            return Err(invalid(
                "filter",
                format!(
                    "{:?} is {} in the layout and cannot be compared with a number",
                    c.field,
                    t.name()
                ),
            ));
        }
    }
    Ok(())
}

/// An `http://host[:port][/path]` URL.
fn check_registry_url(url: &str) -> Result<(), PipelineError> {
    let bad = |why: &str| invalid("source.registry", format!("{url:?}: {why}"));
    if url.starts_with("https://") {
        return Err(bad("https is not supported yet; use http://"));
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(bad("expected http://host:port"));
    };
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') {
        return Err(bad("expected http://host:port"));
    }
    Ok(())
}
