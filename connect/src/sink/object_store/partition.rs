//! Where a record's file goes: the encoded partition (the folders under
//! the topic's folder) and the object name.

use ::object_store::path::Path;

use crate::record::SinkRecord;

/// How records are spread over folders under their topic's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Partitioner {
    /// `partition=<kafka partition>`.
    Default,
    /// `<field>=<value>` per field, joined by `/`. The record's value is
    /// read as JSON whatever the converter; when it is absent, not a JSON
    /// object, lacks the field or holds null there, the folder is
    /// `<field>=null`. Strings are written as they are, other JSON values
    /// as compact JSON. Characters an object name should not hold (such
    /// as `/`) are percent-encoded.
    Field(Vec<String>),
    /// The record's time, rounded down to a multiple of `duration_ms`,
    /// formatted (in UTC) by `format`.
    Time {
        format: PathFormat,
        duration_ms: i64,
    },
}

impl Partitioner {
    /// The folders (relative, already encoded) for `record`, whose time is
    /// `time_ms` (used by the time partitioner only).
    pub fn encode(&self, record: &SinkRecord, time_ms: i64) -> Path {
        match self {
            Partitioner::Default => Path::from_iter([format!("partition={}", record.partition)]),
            Partitioner::Field(fields) => {
                let object = record
                    .value
                    .as_deref()
                    .and_then(|v| serde_json::from_slice::<serde_json::Value>(v).ok());
                let object = object.as_ref().and_then(serde_json::Value::as_object);
                Path::from_iter(fields.iter().map(|field| {
                    let value = match object.and_then(|o| o.get(field)) {
                        None | Some(serde_json::Value::Null) => "null".to_string(),
                        Some(serde_json::Value::String(s)) => s.clone(),
                        Some(other) => other.to_string(),
                    };
                    format!("{field}={value}")
                }))
            }
            Partitioner::Time {
                format,
                duration_ms,
            } => {
                let bucket = time_ms.div_euclid(*duration_ms) * duration_ms;
                let formatted = format.format(bucket);
                Path::from_iter(formatted.split('/').filter(|s| !s.is_empty()))
            }
        }
    }
}

/// The object of the file that starts at `start_offset`:
/// `<prefix>/<topics dir>/<topic>/<partition folders>/<topic>+<kafka
/// partition>+<start offset, 20 digits>.<extension>`.
pub fn object_path(
    prefix: &Path,
    topics_dir: &str,
    topic: &str,
    partition: i32,
    encoded: &Path,
    start_offset: i64,
    extension: &str,
) -> Path {
    let mut path = prefix.clone();
    path.extend(topics_dir.split('/'));
    path.extend([topic]);
    path.extend(encoded.parts());
    path.extend([format!(
        "{topic}+{partition}+{start_offset:020}.{extension}"
    )]);
    path
}

/// A compiled Joda-style pattern (the subset Confluent's time-based
/// partitioner paths use).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathFormat {
    pieces: Vec<Piece>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Field { field: TimeField, width: usize },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimeField {
    Year,
    /// `YY`: the year's last two digits.
    YearOfCentury,
    Month,
    Day,
    Hour,
    Minute,
    Second,
}

impl PathFormat {
    /// Parses `pattern`: runs of `Y`/`y` (year; `YY` its last two digits),
    /// `M` (month, at most two), `d`, `H`, `m`, `s` are fields padded to
    /// the run's length; text between single quotes is literal (`''` is a
    /// quote); any other non-letter is literal. Other letters are refused.
    pub fn parse(pattern: &str) -> Result<Self, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c == '\'' {
                if chars.get(i + 1) == Some(&'\'') {
                    literal.push('\'');
                    i += 2;
                    continue;
                }
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err("a quoted literal is not closed".to_string()),
                        Some('\'') if chars.get(i + 1) == Some(&'\'') => {
                            literal.push('\'');
                            i += 2;
                        }
                        Some('\'') => {
                            i += 1;
                            break;
                        }
                        Some(&other) => {
                            literal.push(other);
                            i += 1;
                        }
                    }
                }
            } else if c.is_ascii_alphabetic() {
                let run = chars[i..].iter().take_while(|&&x| x == c).count();
                let field = match c {
                    'Y' | 'y' if run == 2 => TimeField::YearOfCentury,
                    'Y' | 'y' => TimeField::Year,
                    'M' if run <= 2 => TimeField::Month,
                    'M' => return Err("month names (MMM) are not supported; use MM".to_string()),
                    'd' => TimeField::Day,
                    'H' => TimeField::Hour,
                    'm' => TimeField::Minute,
                    's' => TimeField::Second,
                    other => {
                        return Err(format!(
                            "unsupported pattern letter {other:?}; use YYYY, MM, dd, HH, \
                             mm, ss, and quote literal text ('year'=YYYY)"
                        ))
                    }
                };
                if !literal.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Field { field, width: run });
                i += run;
            } else {
                literal.push(c);
                i += 1;
            }
        }
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal));
        }
        if !pieces.iter().any(|p| matches!(p, Piece::Field { .. })) {
            return Err("the pattern has no time field (such as YYYY or HH)".to_string());
        }
        Ok(PathFormat { pieces })
    }

    /// Formats the UTC time `ms` (milliseconds since the Unix epoch).
    pub fn format(&self, ms: i64) -> String {
        let (year, month, day) = civil_from_days(ms.div_euclid(86_400_000));
        let second_of_day = ms.rem_euclid(86_400_000) / 1000;
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Literal(text) => out.push_str(text),
                Piece::Field { field, width } => {
                    let value = match field {
                        TimeField::Year => year,
                        TimeField::YearOfCentury => year.rem_euclid(100),
                        TimeField::Month => i64::from(month),
                        TimeField::Day => i64::from(day),
                        TimeField::Hour => second_of_day / 3600,
                        TimeField::Minute => second_of_day / 60 % 60,
                        TimeField::Second => second_of_day % 60,
                    };
                    out.push_str(&format!("{value:0width$}"));
                }
            }
        }
        out
    }
}

/// The proleptic Gregorian (year, month, day) of a day counted from
/// 1970-01-01 (negative before it).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Shift the epoch to 0000-03-01 so that a leap day ends each 4-year
    // cycle, then split into 400-year eras of 146,097 days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months counted from March: 0 = March ... 11 = February.
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    // Both are in range by construction (1..=12 and 1..=31).
    (year, month as u32, day as u32)
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
