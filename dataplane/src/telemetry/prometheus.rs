//! Prometheus text exposition: writing it, and reading it back for the
//! OpenTelemetry export, which observes exactly the figures `/metrics`
//! shows (one source of truth for both).

use std::fmt::Write as _;

/// Appends one metric (`kind` is `counter` or `gauge`) with its help line.
pub fn write_metric(out: &mut String, name: &str, kind: &str, help: &str, value: u64) {
    out.push_str(&format!(
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
    ));
}

/// Appends the help and type lines of a family whose samples follow.
pub fn write_family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n");
}

/// Appends one sample with labels; label values are escaped as the format
/// requires (group ids may hold any character).
pub fn write_sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: u64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(k);
            out.push_str("=\"");
            for c in v.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '"' => out.push_str("\\\""),
                    '\n' => out.push_str("\\n"),
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// One metric family read back from the text.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: String,
    /// `counter`, `gauge` or `histogram` (`untyped` when no TYPE line came).
    pub kind: String,
    pub help: String,
    pub samples: Vec<Sample>,
}

/// One sample: its full name (`_bucket`, `_sum` and `_count` for histograms),
/// labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// Reads the text this crate writes back into families, in order; lines it
/// cannot read are skipped.
pub fn parse(text: &str) -> Vec<Family> {
    let mut out: Vec<Family> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            family(&mut out, name).help = help.to_string();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            family(&mut out, name).kind = kind.to_string();
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            if let Some(s) = parse_sample(line) {
                let base = out
                    .last()
                    .filter(|f| {
                        s.name == f.name
                            || (f.kind == "histogram"
                                && s.name
                                    .strip_prefix(f.name.as_str())
                                    .is_some_and(|t| matches!(t, "_bucket" | "_sum" | "_count")))
                    })
                    .map(|f| f.name.clone())
                    .unwrap_or_else(|| s.name.clone());
                family(&mut out, &base).samples.push(s);
            }
        }
    }
    out
}

fn family<'a>(out: &'a mut Vec<Family>, name: &str) -> &'a mut Family {
    match out.iter().position(|f| f.name == name) {
        Some(i) => &mut out[i],
        None => {
            out.push(Family {
                name: name.to_string(),
                kind: "untyped".into(),
                help: String::new(),
                samples: Vec::new(),
            });
            let last = out.len() - 1;
            &mut out[last]
        }
    }
}

fn parse_sample(line: &str) -> Option<Sample> {
    let (name, rest) = match line.find(['{', ' ']) {
        Some(i) => line.split_at(i),
        None => return None,
    };
    let mut labels = Vec::new();
    let mut rest = rest;
    if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices();
        let mut end = None;
        loop {
            // label name up to '='
            let mut key = String::new();
            let mut next = chars.next();
            while let Some((_, c)) = next {
                if c == '}' {
                    end = Some(body.len());
                    break;
                }
                if c == '=' {
                    break;
                }
                if c != ',' {
                    key.push(c);
                }
                next = chars.next();
            }
            if end.is_some() {
                break;
            }
            if chars.next().map(|(_, c)| c) != Some('"') {
                return None;
            }
            let mut value = String::new();
            let mut escaped = false;
            for (_, c) in chars.by_ref() {
                match (escaped, c) {
                    (true, 'n') => {
                        value.push('\n');
                        escaped = false;
                    }
                    (true, c) => {
                        value.push(c);
                        escaped = false;
                    }
                    (false, '\\') => escaped = true,
                    (false, '"') => break,
                    (false, c) => value.push(c),
                }
            }
            labels.push((key, value));
            match chars.clone().next() {
                Some((i, '}')) => {
                    end = Some(i + 1);
                    break;
                }
                Some((_, ',')) => {
                    chars.next();
                }
                _ => return None,
            }
        }
        rest = body.get(end?..)?;
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_samples_read_back_with_their_labels_even_when_escaped() {
        let mut text = String::new();
        write_metric(&mut text, "a_total", "counter", "things", 3);
        write_family(&mut text, "lag", "gauge", "lag");
        write_sample(&mut text, "lag", &[("group", "g\"1\\x"), ("topic", "t")], 7);
        write_sample(&mut text, "lag", &[], 1);
        let fams = parse(&text);
        assert_eq!(fams.len(), 2);
        assert_eq!(fams[0].kind, "counter");
        assert_eq!(fams[0].samples[0].value, 3.0);
        assert_eq!(fams[1].samples.len(), 2);
        assert_eq!(
            fams[1].samples[0].labels,
            vec![
                ("group".to_string(), "g\"1\\x".to_string()),
                ("topic".to_string(), "t".to_string())
            ]
        );
        assert_eq!(fams[1].samples[0].value, 7.0);
    }

    #[test]
    fn histogram_samples_belong_to_their_family() {
        let h = crate::telemetry::LatencyHistogram::default();
        h.record(std::time::Duration::from_millis(2));
        let mut text = String::new();
        h.render(&mut text, "p_seconds", "produce");
        let fams = parse(&text);
        assert_eq!(fams.len(), 1);
        assert_eq!(fams[0].kind, "histogram");
        let count = fams[0]
            .samples
            .iter()
            .find(|s| s.name == "p_seconds_count")
            .map(|s| s.value);
        assert_eq!(count, Some(1.0));
        let inf = fams[0]
            .samples
            .iter()
            .find(|s| s.labels.first().map(|l| l.1.as_str()) == Some("+Inf"));
        assert_eq!(inf.map(|s| s.value), Some(1.0));
    }
}
