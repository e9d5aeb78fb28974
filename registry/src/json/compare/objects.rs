//! Object schemas: properties under open, partially open and closed
//! content models, `required`, `additionalProperties`, dependencies and
//! the property-count bounds.

use serde_json::{Map, Value};

use super::{all_keys, is_any, is_false, join, lower_bound, upper_bound, Comparer, Sub};

impl Comparer<'_> {
    pub(super) fn compare_objects(
        &mut self,
        wdoc: usize,
        wm: &Map<String, Value>,
        rdoc: usize,
        rm: &Map<String, Value>,
        path: &str,
        out: &mut Vec<String>,
    ) {
        let empty = Map::new();
        let wprops = wm
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let rprops = rm
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let required = |m: &Map<String, Value>, key: &str| {
            m.get("required")
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(key)))
        };
        let has_default = |v: &Value| v.get("default").is_some();
        for key in all_keys(Some(wprops), Some(rprops)) {
            let p = join(&join(path, "properties"), key);
            let (wp, rp) = (wprops.get(key), rprops.get(key));
            if let Some(rp) = rp {
                if required(rm, key) && !required(wm, key) && !has_default(rp) {
                    out.push(format!(
                        "{p}: the reader requires the property {key}, which the writer did not, and it has no default"
                    ));
                }
            }
            match (wp, rp) {
                (Some(wp), Some(rp)) => {
                    let (w, r) = (
                        Sub {
                            doc: wdoc,
                            value: wp.clone(),
                        },
                        Sub {
                            doc: rdoc,
                            value: rp.clone(),
                        },
                    );
                    self.compare(&w, &r, &p, out);
                }
                (Some(wp), None) => {
                    let w = Sub {
                        doc: wdoc,
                        value: wp.clone(),
                    };
                    match content_model(rm, key) {
                        Model::Open => {}
                        Model::Partial(schema) => {
                            let r = Sub {
                                doc: rdoc,
                                value: schema,
                            };
                            if !self.reads(&w, &r) {
                                out.push(format!(
                                    "{p}: the reader removed the property {key} and its additional or pattern properties do not accept the writer's values"
                                ));
                            }
                        }
                        Model::Closed => {
                            if !is_false(Some(wp)) {
                                out.push(format!(
                                    "{p}: the reader removed the property {key} from a closed content model (additionalProperties false)"
                                ));
                            }
                        }
                    }
                }
                (None, Some(rp)) => {
                    let r = Sub {
                        doc: rdoc,
                        value: rp.clone(),
                    };
                    match content_model(wm, key) {
                        Model::Open => {
                            if !is_any(rp) {
                                out.push(format!(
                                    "{p}: the reader added the property {key} to an open content model: the writer may have written it with any value"
                                ));
                            }
                        }
                        Model::Partial(schema) => {
                            let w = Sub {
                                doc: wdoc,
                                value: schema,
                            };
                            if !self.reads(&w, &r) {
                                out.push(format!(
                                    "{p}: the reader added the property {key}, which does not accept the writer's additional or pattern properties"
                                ));
                            }
                        }
                        Model::Closed => {}
                    }
                }
                (None, None) => {}
            }
        }
        // Required names without a property schema.
        if let Some(rreq) = rm.get("required").and_then(Value::as_array) {
            for key in rreq.iter().filter_map(Value::as_str) {
                if !rprops.contains_key(key) && !required(wm, key) {
                    out.push(format!(
                        "{}: the reader requires the property {key}, which the writer did not",
                        join(path, "required")
                    ));
                }
            }
        }
        self.compare_additional(wdoc, wm, rdoc, rm, "additionalProperties", path, out);
        self.compare_dependencies(wdoc, wm, rdoc, rm, path, out);
        upper_bound(wm, rm, "maxProperties", path, out);
        lower_bound(wm, rm, "minProperties", path, out);
    }

    /// `additionalProperties` or `additionalItems`.
    #[allow(clippy::too_many_arguments)]
    fn compare_additional(
        &mut self,
        wdoc: usize,
        wm: &Map<String, Value>,
        rdoc: usize,
        rm: &Map<String, Value>,
        keyword: &str,
        path: &str,
        out: &mut Vec<String>,
    ) {
        let p = join(path, keyword);
        let (wa, ra) = (wm.get(keyword), rm.get(keyword));
        let schema = |v: Option<&Value>| v.filter(|v| v.is_object()).cloned();
        match (is_false(wa), is_false(ra)) {
            (false, true) => out.push(format!("{p}: the reader refuses what the writer allowed")),
            (true, _) => {}
            (false, false) => match (schema(wa), schema(ra)) {
                (None, Some(_)) => out.push(format!(
                    "{p}: the reader constrains them with a schema, the writer did not"
                )),
                (Some(w), Some(r)) => {
                    let (w, r) = (
                        Sub {
                            doc: wdoc,
                            value: w,
                        },
                        Sub {
                            doc: rdoc,
                            value: r,
                        },
                    );
                    self.compare(&w, &r, &p, out);
                }
                _ => {}
            },
        }
    }

    fn compare_dependencies(
        &mut self,
        wdoc: usize,
        wm: &Map<String, Value>,
        rdoc: usize,
        rm: &Map<String, Value>,
        path: &str,
        out: &mut Vec<String>,
    ) {
        for keyword in ["dependencies", "dependentRequired", "dependentSchemas"] {
            let (wd, rd) = (
                wm.get(keyword).and_then(Value::as_object),
                rm.get(keyword).and_then(Value::as_object),
            );
            for key in all_keys(wd, rd) {
                let p = join(&join(path, keyword), key);
                match (wd.and_then(|m| m.get(key)), rd.and_then(|m| m.get(key))) {
                    (_, None) => {}
                    (None, Some(_)) => out.push(format!("{p}: the reader added a dependency")),
                    (Some(Value::Array(wa)), Some(Value::Array(ra))) => {
                        if !ra.iter().all(|v| wa.contains(v)) {
                            out.push(format!(
                                "{p}: the reader's dependency requires more properties"
                            ));
                        }
                    }
                    (Some(w), Some(r)) if w.is_array() || r.is_array() => {
                        out.push(format!("{p}: the dependency changed"))
                    }
                    (Some(w), Some(r)) => {
                        let (w, r) = (
                            Sub {
                                doc: wdoc,
                                value: w.clone(),
                            },
                            Sub {
                                doc: rdoc,
                                value: r.clone(),
                            },
                        );
                        self.compare(&w, &r, &p, out);
                    }
                }
            }
        }
    }
}

/// How an object schema treats a property it does not list.
enum Model {
    /// Anything goes.
    Open,
    /// A schema (a matching `patternProperties` one, else
    /// `additionalProperties`) decides.
    Partial(Value),
    /// Refused (`additionalProperties: false`).
    Closed,
}

fn content_model(m: &Map<String, Value>, key: &str) -> Model {
    if let Some(patterns) = m.get("patternProperties").and_then(Value::as_object) {
        for (pattern, schema) in patterns {
            if regex_lite_find(pattern, key) {
                return Model::Partial(schema.clone());
            }
        }
    }
    match m.get("additionalProperties") {
        Some(Value::Bool(false)) => Model::Closed,
        Some(v @ Value::Object(_)) => Model::Partial(v.clone()),
        _ => Model::Open,
    }
}

/// Whether a `patternProperties` pattern matches a property name. Only the
/// common forms are understood (`^prefix`, `suffix$`, `^exact$`, a plain
/// substring, `.*`); any other pattern is taken to match, which keeps the
/// comparison on the side of comparing the schemas.
fn regex_lite_find(pattern: &str, key: &str) -> bool {
    let special = |s: &str| s.chars().any(|c| "\\.[]()*+?{}|".contains(c));
    if pattern == ".*" || pattern == "^.*$" {
        return true;
    }
    let anchored_start = pattern.starts_with('^');
    let anchored_end = pattern.ends_with('$') && !pattern.ends_with("\\$");
    let core = pattern.trim_start_matches('^');
    let core = if anchored_end {
        &core[..core.len().saturating_sub(1)]
    } else {
        core
    };
    if special(core) {
        return true;
    }
    match (anchored_start, anchored_end) {
        (true, true) => key == core,
        (true, false) => key.starts_with(core),
        (false, true) => key.ends_with(core),
        (false, false) => key.contains(core),
    }
}
