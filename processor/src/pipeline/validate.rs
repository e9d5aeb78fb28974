//! The checks of a pipeline file that its types alone cannot make; each
//! error names the key at fault.

use std::time::Duration;

use super::*;

impl Pipeline {
    /// Checks what the types alone cannot.
    pub fn validate(&self) -> Result<(), PipelineError> {
        if self.name.trim().is_empty() {
            return Err(invalid("name", "must not be empty"));
        }
        let s = &self.source;
        if s.bootstrap.trim().is_empty() || !s.bootstrap.contains(':') {
            return Err(invalid(
                "source.bootstrap",
                "expected host:port (Kafka) or aero://host:port (native)",
            ));
        }
        if s.bootstrap.contains("://") && !is_native(&s.bootstrap) {
            return Err(invalid(
                "source.bootstrap",
                format!(
                    "{:?}: expected host:port (Kafka) or aero://host:port (native)",
                    s.bootstrap
                ),
            ));
        }
        if s.topic.trim().is_empty() {
            return Err(invalid("source.topic", "must not be empty"));
        }
        if let Some(tls) = &s.tls {
            if tls.cert.is_some() != tls.key.is_some() {
                return Err(invalid(
                    "source.tls",
                    "a client certificate needs its key (cert and key together)",
                ));
            }
            if is_native(&s.bootstrap) {
                return Err(invalid(
                    "source.tls",
                    "the native protocol's TLS is QUIC's (aero+quic://), not read by the processor yet",
                ));
            }
        }
        if let Some(sasl) = &s.sasl {
            let m = sasl.mechanism.to_ascii_uppercase();
            if !["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"].contains(&m.as_str()) {
                return Err(invalid(
                    "source.sasl.mechanism",
                    format!(
                        "{:?}: expected SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN",
                        sasl.mechanism
                    ),
                ));
            }
            if sasl.username.is_empty() {
                return Err(invalid("source.sasl.username", "must not be empty"));
            }
        }
        if s.event_time.trim().is_empty() {
            return Err(invalid("source.event_time", "must name a field"));
        }
        if s.key.as_deref().is_some_and(|k| k.trim().is_empty()) {
            return Err(invalid("source.key", "must name a field (or be left out)"));
        }
        if s.idle_timeout.is_zero() {
            return Err(invalid("source.idle_timeout", "must be more than 0"));
        }
        self.validate_window()?;
        self.validate_filters()?;
        layout::validate(self)?;
        if self.checkpoint_interval.as_millis() < 1 {
            return Err(invalid("checkpoint_interval", "must be at least 1ms"));
        }
        if self.aggregates.is_empty() {
            return Err(invalid("aggregates", "at least one aggregate is needed"));
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, a) in self.aggregates.iter().enumerate() {
            let at = |key: &str| format!("aggregates[{i}].{key}");
            match (a.op, &a.field) {
                (AggregateOp::Count, Some(_)) => {
                    return Err(invalid(&at("field"), "count takes no field"))
                }
                (AggregateOp::Count, None) => {}
                (_, None) => return Err(invalid(&at("field"), "this op needs a field")),
                (_, Some(f)) if f.trim().is_empty() => {
                    return Err(invalid(&at("field"), "must name a field"))
                }
                _ => {}
            }
            match (a.op, &a.weight) {
                (AggregateOp::Wavg, None) => {
                    return Err(invalid(&at("weight"), "wavg needs a weight field"))
                }
                (AggregateOp::Wavg, Some(w)) if w.trim().is_empty() => {
                    return Err(invalid(&at("weight"), "must name a field"))
                }
                (AggregateOp::Wavg, Some(_)) | (_, None) => {}
                (_, Some(_)) => return Err(invalid(&at("weight"), "only wavg takes a weight")),
            }
            match (a.op, a.q) {
                (AggregateOp::Quantile, None) => {
                    return Err(invalid(&at("q"), "quantile needs q, from 0 to 1"))
                }
                (AggregateOp::Quantile, Some(q)) if !(0.0..=1.0).contains(&q) => {
                    return Err(invalid(&at("q"), format!("{q} is not from 0 to 1")))
                }
                (AggregateOp::Quantile, Some(_)) | (_, None) => {}
                (_, Some(_)) => return Err(invalid(&at("q"), "only quantile takes q")),
            }
            if a.name.trim().is_empty() {
                return Err(invalid(&at("as"), "must name the output column"));
            }
            if [KEY_COLUMN, WINDOW_START_COLUMN, WINDOW_END_COLUMN].contains(&a.name.as_str()) {
                return Err(invalid(
                    &at("as"),
                    format!("{:?} is a column every output already has", a.name),
                ));
            }
            if self.live.is_some() && a.name == FINAL {
                return Err(invalid(
                    &at("as"),
                    "\"final\" marks the live view's rows as final or early; choose another name",
                ));
            }
            if !names.insert(a.name.as_str()) {
                return Err(invalid(&at("as"), format!("{:?} is used twice", a.name)));
            }
        }
        match (self.sink.kind, &self.sink.topic) {
            (SinkKind::Topic, None) => {
                return Err(invalid("sink.topic", "a topic sink needs its topic"))
            }
            (SinkKind::Topic, Some(t)) if t.trim().is_empty() => {
                return Err(invalid("sink.topic", "must not be empty"))
            }
            (SinkKind::Topic, Some(t)) if *t == self.source.topic => {
                return Err(invalid("sink.topic", "must not be the source topic"))
            }
            (SinkKind::Topic, Some(_)) if is_native(&s.bootstrap) => {
                return Err(invalid(
                    "sink.type",
                    "an output topic is written over the Kafka protocol: give \
                     source.bootstrap as host:port, not aero://",
                ))
            }
            (SinkKind::Parquet, Some(_)) => {
                return Err(invalid("sink.topic", "only a topic sink takes a topic"))
            }
            (SinkKind::Topic, _) if self.sink.partition_by.is_some() => {
                return Err(invalid(
                    "sink.partition_by",
                    "only a parquet sink puts its files in folders",
                ))
            }
            _ => {}
        }
        if let Some(live) = &self.live {
            if live.listen.parse::<std::net::SocketAddr>().is_err() {
                return Err(invalid(
                    "live.listen",
                    format!(
                        "{:?}: expected an address such as 127.0.0.1:9095",
                        live.listen
                    ),
                ));
            }
        }
        if let Some(d) = &self.distribution {
            if d.coordinators.is_empty() {
                return Err(invalid(
                    "distribution.coordinators",
                    "name at least one agent's HTTP address, e.g. http://127.0.0.1:9001",
                ));
            }
            for c in &d.coordinators {
                let ok = c
                    .strip_prefix("http://")
                    .is_some_and(|rest| !rest.is_empty() && !rest.contains('/'));
                if !ok {
                    return Err(invalid(
                        "distribution.coordinators",
                        format!("{c:?}: expected http://host:port"),
                    ));
                }
            }
            if d.worker
                .as_ref()
                .is_some_and(|w| w.trim().is_empty() || w.len() > 255)
            {
                return Err(invalid("distribution.worker", "1 to 255 characters"));
            }
            if !(Duration::from_secs(1)..=Duration::from_secs(300)).contains(&d.lease_ttl) {
                return Err(invalid("distribution.lease_ttl", "1s to 300s"));
            }
        }
        let url = &self.sink.url;
        match url.split_once("://") {
            Some(("s3", rest)) if rest.split('/').next().is_some_and(|b| !b.is_empty()) => {}
            Some(("file", rest)) if rest.starts_with('/') => {}
            _ => {
                return Err(invalid(
                    "sink.url",
                    format!("{url:?}: expected s3://bucket/prefix or file:///abs/dir"),
                ))
            }
        }
        Ok(())
    }

    fn validate_window(&self) -> Result<(), PipelineError> {
        let w = &self.window;
        let at_least_1ms = |key: &str, d: Option<Duration>| match d {
            None => Err(invalid(key, format!("a {} window needs it", w.kind.name()))),
            Some(d) if d.as_millis() < 1 => Err(invalid(key, "must be at least 1ms")),
            Some(_) => Ok(()),
        };
        let refuse = |key: &str, d: Option<Duration>| match d {
            Some(_) => Err(invalid(
                key,
                format!("a {} window does not take it", w.kind.name()),
            )),
            None => Ok(()),
        };
        match w.kind {
            WindowKind::Tumbling => {
                at_least_1ms("window.size", w.size)?;
                refuse("window.slide", w.slide)?;
                refuse("window.gap", w.gap)?;
            }
            WindowKind::Sliding => {
                at_least_1ms("window.size", w.size)?;
                at_least_1ms("window.slide", w.slide)?;
                refuse("window.gap", w.gap)?;
                let (size, slide) = (ms(w.size), ms(w.slide));
                if slide > size || size % slide != 0 {
                    return Err(invalid(
                        "window.slide",
                        format!(
                            "the size ({size}ms) must be a whole multiple of the slide ({slide}ms)"
                        ),
                    ));
                }
                if size / slide > MAX_WINDOWS_PER_RECORD {
                    return Err(invalid(
                        "window.slide",
                        format!(
                            "a record would fall in {} windows; at most {MAX_WINDOWS_PER_RECORD}",
                            size / slide
                        ),
                    ));
                }
            }
            WindowKind::Session => {
                at_least_1ms("window.gap", w.gap)?;
                refuse("window.size", w.size)?;
                refuse("window.slide", w.slide)?;
            }
        }
        if let Some(early) = w.early {
            let (length, what) = match w.kind {
                WindowKind::Session => (w.gap, "gap"),
                WindowKind::Tumbling | WindowKind::Sliding => (w.size, "size"),
            };
            if early.as_millis() < 1 {
                return Err(invalid("window.early", "must be at least 1ms"));
            }
            if length.is_some_and(|l| early >= l) {
                return Err(invalid(
                    "window.early",
                    format!(
                        "must be shorter than the window's {what} ({}ms), or every \
                         window would close before its first early result",
                        ms(length)
                    ),
                ));
            }
            if self.live.is_none() {
                return Err(invalid(
                    "window.early",
                    "early results go to the live view only: add live: {listen: ...}",
                ));
            }
        }
        Ok(())
    }

    fn validate_filters(&self) -> Result<(), PipelineError> {
        for (i, item) in self.filter.iter().enumerate() {
            for (j, f) in item.conditions().iter().enumerate() {
                let at = |key: &str| match item {
                    FilterItem::Condition(_) => format!("filter[{i}].{key}"),
                    FilterItem::Any(_) => format!("filter[{i}].any[{j}].{key}"),
                };
                validate_condition(f, at)?;
            }
        }
        Ok(())
    }
}

/// Checks one condition; `at` names its keys in errors.
fn validate_condition(f: &Filter, at: impl Fn(&str) -> String) -> Result<(), PipelineError> {
    if f.field.trim().is_empty() {
        return Err(invalid(&at("field"), "must name a field"));
    }
    match f.op {
        FilterOp::In => {
            if f.value.is_some() {
                return Err(invalid(&at("value"), "`in` takes `values`, a list"));
            }
            if f.values.as_ref().is_none_or(Vec::is_empty) {
                return Err(invalid(&at("values"), "`in` needs at least one value"));
            }
        }
        _ => {
            if f.values.is_some() {
                return Err(invalid(&at("values"), "only `in` takes `values`"));
            }
            if f.value.is_none() {
                return Err(invalid(&at("value"), "this op needs a value"));
            }
        }
    }
    let text = f.is_text();
    if f.operands()
        .iter()
        .any(|v| matches!(v, Scalar::Text(_)) != text)
    {
        return Err(invalid(
            &at("values"),
            "mixes numbers and strings; use one or the other",
        ));
    }
    Ok(())
}
