//! Whether every document valid under a writer's JSON Schema is valid
//! under a reader's, by Confluent's JSON Schema compatibility rules.
//!
//! Rules, the reader being the newer schema under BACKWARD:
//! - a different kind of schema is incompatible (a type change), unless
//!   the reader accepts anything (`true`, `{}`) or the writer nothing
//!   (`false`); `integer` read as `number` is compatible, the reverse not;
//! - a reader `anyOf`/`oneOf` reads a writer schema one of its subschemas
//!   reads; a single-subschema combination is its subschema;
//! - bounds (`maxLength`, `maximum`, `maxItems`, `maxProperties`, their
//!   `min` forms, `exclusive*`, `multipleOf`, `pattern`, `uniqueItems`):
//!   removed or loosened is compatible, added or tightened is not;
//! - `enum`/`const`: the reader's values must include the writer's;
//! - properties: one the writer lacks may be added by the reader when the
//!   writer's content model was closed (`additionalProperties: false`)
//!   or when it accepts anything; under an open writer model a typed
//!   property added is incompatible (the writer may have written it with
//!   any value); under a partially open one (`additionalProperties` or
//!   `patternProperties` a schema) the added property must read that
//!   schema. A property the reader lacks may be removed when the reader's
//!   model is open, or partially open with a schema that reads it, or when
//!   the writer's was `false`; from a closed reader model it is not;
//! - `required`: a property made required is incompatible unless it has a
//!   default, one no longer required is compatible; a new required
//!   property likewise;
//! - `additionalProperties`/`additionalItems`: allowed where they were
//!   not is compatible, refused where they were allowed is not; a schema
//!   where there was none is incompatible, none where there was one is
//!   compatible, two schemas are compared;
//! - `items` and tuples (`items` arrays, `prefixItems`) pairwise, with the
//!   same open/closed rules as properties;
//! - `dependencies`/`dependentRequired`/`dependentSchemas`: removed or
//!   narrowed compatible, added or extended not;
//! - combinations of the same criterion: subschemas matched one to one
//!   (a maximum matching of compatible pairs); `anyOf` growing or
//!   `allOf` shrinking is compatible, the reverse not; a criterion changed
//!   to `anyOf` is compatible, to `oneOf` only from a single subschema;
//! - `not`: the reader's negated schema must be read by the writer's;
//! - `$ref`s are followed, into references too; recursion is guarded.
//!
//! Annotations (`title`, `description`, `default`, `$id`) never matter.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::{all_keys, distinct, implied_type, sorted_compact, texts, Docs};

pub(super) fn cannot_read(writer: &Docs, reader: &Docs) -> Vec<String> {
    let mut c = Comparer {
        writer,
        reader,
        in_progress: HashSet::new(),
    };
    let mut out = Vec::new();
    let w = Sub {
        doc: 0,
        value: writer.docs[0].value.clone(),
    };
    let r = Sub {
        doc: 0,
        value: reader.docs[0].value.clone(),
    };
    c.compare(&w, &r, "#", &mut out);
    out
}

/// A subschema and the document its `$ref`s resolve in.
#[derive(Clone)]
struct Sub {
    doc: usize,
    value: Value,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Crit {
    All,
    Any,
    One,
}

impl Crit {
    fn keyword(self) -> &'static str {
        match self {
            Crit::All => "allOf",
            Crit::Any => "anyOf",
            Crit::One => "oneOf",
        }
    }
}

/// What a subschema is, for comparison: one kind of schema each.
enum Shape {
    Any,
    Never,
    Enum(Vec<Value>),
    Not(Sub),
    Combined(Crit, Vec<Sub>),
    Null,
    Boolean,
    Number {
        integer: bool,
        m: Map<String, Value>,
    },
    String(Map<String, Value>),
    Object(Map<String, Value>),
    Array(Map<String, Value>),
}

impl Shape {
    fn kind(&self) -> &'static str {
        match self {
            Shape::Any => "any value",
            Shape::Never => "no value",
            Shape::Enum(_) => "enum",
            Shape::Not(_) => "not",
            Shape::Combined(c, _) => c.keyword(),
            Shape::Null => "null",
            Shape::Boolean => "boolean",
            Shape::Number { integer: true, .. } => "integer",
            Shape::Number { .. } => "number",
            Shape::String(_) => "string",
            Shape::Object(_) => "object",
            Shape::Array(_) => "array",
        }
    }

    fn same_kind(&self, other: &Shape) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}

const COMBINATORS: [(&str, Crit); 3] = [
    ("allOf", Crit::All),
    ("anyOf", Crit::Any),
    ("oneOf", Crit::One),
];

struct Comparer<'d> {
    writer: &'d Docs,
    reader: &'d Docs,
    /// (writer, reader) pairs being compared where one side is a `$ref`:
    /// met again, they are taken as compatible.
    in_progress: HashSet<(usize, String, usize, String)>,
}

fn num(m: &Map<String, Value>, key: &str) -> Option<f64> {
    m.get(key).and_then(Value::as_f64)
}

fn is_false(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Bool(false)))
}

fn is_any(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

fn join(path: &str, step: &str) -> String {
    format!("{path}/{step}")
}

impl<'d> Comparer<'d> {
    /// Follows `$ref`s and splits a schema into the one kind it is.
    fn shape(&self, sub: &Sub, docs: &Docs) -> Shape {
        let mut doc = sub.doc;
        let mut value = &sub.value;
        for _ in 0..64 {
            match value.get("$ref").and_then(Value::as_str) {
                Some(r) => match docs.resolve(doc, r) {
                    Some((d, v)) => {
                        doc = d;
                        value = v;
                    }
                    None => return Shape::Any,
                },
                None => break,
            }
        }
        let m = match value {
            Value::Bool(true) => return Shape::Any,
            Value::Object(m) => m,
            _ => return Shape::Never,
        };
        if m.contains_key("$ref") {
            // A cycle of `$ref`s naming each other: no constraint.
            return Shape::Any;
        }
        let mut shapes: Vec<Shape> = Vec::new();
        let typed: Map<String, Value> = m
            .iter()
            .filter(|(k, _)| {
                !matches!(
                    k.as_str(),
                    "enum" | "const" | "allOf" | "anyOf" | "oneOf" | "not"
                )
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let types: Vec<&str> = match m.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => implied_type(m).into_iter().collect(),
        };
        match types.as_slice() {
            [] => {}
            [t] => shapes.push(typed_shape(t, typed.clone())),
            many => {
                let subs = many
                    .iter()
                    .map(|t| {
                        let mut one = typed.clone();
                        one.insert("type".into(), Value::String((*t).to_owned()));
                        Sub {
                            doc,
                            value: Value::Object(one),
                        }
                    })
                    .collect();
                shapes.push(Shape::Combined(Crit::Any, subs));
            }
        }
        if let Some(Value::Array(values)) = m.get("enum") {
            shapes.push(Shape::Enum(values.clone()));
        } else if let Some(v) = m.get("const") {
            shapes.push(Shape::Enum(vec![v.clone()]));
        }
        for (key, crit) in COMBINATORS {
            if let Some(Value::Array(subs)) = m.get(key) {
                let subs = subs
                    .iter()
                    .map(|v| Sub {
                        doc,
                        value: v.clone(),
                    })
                    .collect();
                shapes.push(Shape::Combined(crit, subs));
            }
        }
        if let Some(v) = m.get("not") {
            shapes.push(Shape::Not(Sub {
                doc,
                value: v.clone(),
            }));
        }
        if shapes.len() <= 1 {
            return shapes.pop().unwrap_or(Shape::Any);
        }
        // Several kinds at once (`type` with `enum`, say): all of them.
        let mut parts = Vec::new();
        if !types.is_empty() {
            parts.push(Sub {
                doc,
                value: Value::Object(typed),
            });
        }
        for key in ["enum", "const", "allOf", "anyOf", "oneOf", "not"] {
            if let Some(v) = m.get(key) {
                let value = Value::Object(Map::from_iter([(key.to_owned(), v.clone())]));
                parts.push(Sub { doc, value });
            }
        }
        Shape::Combined(Crit::All, parts)
    }

    /// Whether the reader reads the writer, without reporting why not.
    fn reads(&mut self, w: &Sub, r: &Sub) -> bool {
        let mut out = Vec::new();
        self.compare(w, r, "#", &mut out);
        out.is_empty()
    }

    fn guard_key(sub: &Sub) -> String {
        match sub.value.get("$ref").and_then(Value::as_str) {
            Some(r) => format!("$ref:{r}"),
            None => sorted_compact(&sub.value),
        }
    }

    fn compare(&mut self, w: &Sub, r: &Sub, path: &str, out: &mut Vec<String>) {
        let refs = w.value.get("$ref").is_some() || r.value.get("$ref").is_some();
        let key = refs.then(|| (w.doc, Self::guard_key(w), r.doc, Self::guard_key(r)));
        if let Some(key) = &key {
            if !self.in_progress.insert(key.clone()) {
                return;
            }
        }
        self.compare_shapes(w, r, path, out);
        if let Some(key) = &key {
            self.in_progress.remove(key);
        }
    }

    fn compare_shapes(&mut self, w: &Sub, r: &Sub, path: &str, out: &mut Vec<String>) {
        let ws = self.shape(w, self.writer);
        let rs = self.shape(r, self.reader);
        match (&ws, &rs) {
            (Shape::Combined(..), Shape::Combined(..)) => {}
            (_, Shape::Combined(crit, subs)) => {
                if (subs.len() == 1 || *crit != Crit::All) && subs.iter().any(|s| self.reads(w, s))
                {
                    return;
                }
            }
            (Shape::Combined(_, subs), _) if subs.len() == 1 => {
                if self.reads(&subs[0], r) {
                    return;
                }
            }
            _ => {}
        }
        if !ws.same_kind(&rs) {
            if !matches!(ws, Shape::Never) && !matches!(rs, Shape::Any) {
                out.push(format!(
                    "{path}: the type changed: the reader's {} does not accept the writer's {}",
                    rs.kind(),
                    ws.kind()
                ));
            }
            return;
        }
        match (ws, rs) {
            (Shape::String(wm), Shape::String(rm)) => {
                upper_bound(&wm, &rm, "maxLength", path, out);
                lower_bound(&wm, &rm, "minLength", path, out);
                match (wm.get("pattern"), rm.get("pattern")) {
                    (None, Some(_)) => out.push(format!("{path}: the reader added a pattern")),
                    (Some(a), Some(b)) if a != b => out.push(format!(
                        "{path}: the reader changed the pattern from {a} to {b}"
                    )),
                    _ => {}
                }
            }
            (Shape::Number { integer: wi, m: wm }, Shape::Number { integer: ri, m: rm }) => {
                if !wi && ri {
                    out.push(format!(
                        "{path}: the type narrowed: the reader accepts integers only, the writer any number"
                    ));
                }
                upper_bound(&wm, &rm, "maximum", path, out);
                upper_bound(&wm, &rm, "exclusiveMaximum", path, out);
                lower_bound(&wm, &rm, "minimum", path, out);
                lower_bound(&wm, &rm, "exclusiveMinimum", path, out);
                match (num(&wm, "multipleOf"), num(&rm, "multipleOf")) {
                    (None, Some(b)) => out.push(format!("{path}: the reader added multipleOf {b}")),
                    (Some(a), Some(b)) if (a / b).fract() != 0.0 => out.push(format!(
                        "{path}: the reader's multipleOf {b} does not divide the writer's {a}"
                    )),
                    _ => {}
                }
            }
            (Shape::Enum(wv), Shape::Enum(rv)) => {
                let known = texts(&rv);
                let missing: Vec<String> = texts(&wv)
                    .into_keys()
                    .filter(|k| !known.contains_key(k))
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                if !missing.is_empty() {
                    out.push(format!(
                        "{path}/enum: the reader's enum lacks the writer's values {}",
                        missing.join(", ")
                    ));
                }
            }
            (Shape::Not(wn), Shape::Not(rn)) => {
                // Refusing what `rn` accepts must refuse no more than
                // refusing what `wn` accepts: `wn` reads `rn`.
                if !self.reads(&rn, &wn) {
                    out.push(format!(
                        "{path}/not: the reader refuses documents the writer's \"not\" allowed"
                    ));
                }
            }
            (Shape::Combined(wc, wsubs), Shape::Combined(rc, rsubs)) => {
                self.compare_combined(wc, wsubs, rc, rsubs, path, out);
            }
            (Shape::Object(wm), Shape::Object(rm)) => {
                self.compare_objects(w.doc, &wm, r.doc, &rm, path, out)
            }
            (Shape::Array(wm), Shape::Array(rm)) => {
                self.compare_arrays(w.doc, &wm, r.doc, &rm, path, out)
            }
            _ => {}
        }
    }

    fn compare_combined(
        &mut self,
        wc: Crit,
        wsubs: Vec<Sub>,
        rc: Crit,
        rsubs: Vec<Sub>,
        path: &str,
        out: &mut Vec<String>,
    ) {
        let path = join(path, rc.keyword());
        let wsubs: Vec<Sub> = distinct(wsubs.into_iter().map(|s| (s.doc, s.value)).collect())
            .into_iter()
            .map(|(doc, value)| Sub { doc, value })
            .collect();
        let rsubs: Vec<Sub> = distinct(rsubs.into_iter().map(|s| (s.doc, s.value)).collect())
            .into_iter()
            .map(|(doc, value)| Sub { doc, value })
            .collect();
        let allowed = wc == rc
            || rc == Crit::Any
            || (rc == Crit::One && wsubs.len() == 1)
            || (rc == Crit::All && wsubs.len() == 1 && rsubs.len() == 1);
        if !allowed {
            out.push(format!(
                "{path}: the combination changed from {} to {}",
                wc.keyword(),
                rc.keyword()
            ));
            return;
        }
        if wsubs.len() < rsubs.len() && rc == Crit::All {
            out.push(format!(
                "{path}: the reader's allOf has more subschemas than the writer's"
            ));
        } else if wsubs.len() > rsubs.len() && rc != Crit::All {
            out.push(format!(
                "{path}: the reader's {} has fewer subschemas than the writer's",
                rc.keyword()
            ));
        }
        let edges: Vec<Vec<usize>> = wsubs
            .iter()
            .map(|w| {
                (0..rsubs.len())
                    .filter(|&j| self.reads(w, &rsubs[j]))
                    .collect()
            })
            .collect();
        let matched = max_matching(&edges, rsubs.len());
        if matched < wsubs.len().min(rsubs.len()) {
            out.push(format!(
                "{path}: the subschemas changed: only {matched} of the writer's {} match one of the reader's {}",
                wsubs.len(),
                rsubs.len()
            ));
        }
    }

    fn compare_objects(
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

    fn compare_arrays(
        &mut self,
        wdoc: usize,
        wm: &Map<String, Value>,
        rdoc: usize,
        rm: &Map<String, Value>,
        path: &str,
        out: &mut Vec<String>,
    ) {
        let (wt, wall, wextra) = array_parts(wm);
        let (rt, rall, rextra) = array_parts(rm);
        let p = join(path, "items");
        match (wall, rall) {
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
            (None, Some(r)) if !is_any(&r) => out.push(format!(
                "{p}: the reader constrains the items, the writer did not"
            )),
            _ => {}
        }
        for i in 0..wt.len().max(rt.len()) {
            let p = join(&p, &i.to_string());
            match (wt.get(i), rt.get(i)) {
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
                (Some(w), None) => match &rextra {
                    Extra::Open => {}
                    Extra::Partial(schema) => {
                        let (w, r) = (
                            Sub {
                                doc: wdoc,
                                value: w.clone(),
                            },
                            Sub {
                                doc: rdoc,
                                value: schema.clone(),
                            },
                        );
                        if !self.reads(&w, &r) {
                            out.push(format!(
                                "{p}: the reader removed the item, and its additional items do not accept the writer's"
                            ));
                        }
                    }
                    Extra::Closed => {
                        if !is_false(Some(w)) {
                            out.push(format!(
                                "{p}: the reader removed the item from a closed content model"
                            ));
                        }
                    }
                },
                (None, Some(r)) => match &wextra {
                    Extra::Open => {
                        if !is_any(r) {
                            out.push(format!(
                                "{p}: the reader added an item to an open content model: the writer may have written any value there"
                            ));
                        }
                    }
                    Extra::Partial(schema) => {
                        let (w, r) = (
                            Sub {
                                doc: wdoc,
                                value: schema.clone(),
                            },
                            Sub {
                                doc: rdoc,
                                value: r.clone(),
                            },
                        );
                        if !self.reads(&w, &r) {
                            out.push(format!(
                                "{p}: the reader added an item that does not accept the writer's additional items"
                            ));
                        }
                    }
                    Extra::Closed => {}
                },
                (None, None) => {}
            }
        }
        if !wt.is_empty() || !rt.is_empty() {
            let p = join(path, "additionalItems");
            match (&wextra, &rextra) {
                (Extra::Closed, _) | (_, Extra::Open) => {}
                (_, Extra::Closed) => {
                    out.push(format!("{p}: the reader refuses what the writer allowed"))
                }
                (Extra::Open, Extra::Partial(_)) => out.push(format!(
                    "{p}: the reader constrains them with a schema, the writer did not"
                )),
                (Extra::Partial(w), Extra::Partial(r)) => {
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
        upper_bound(wm, rm, "maxItems", path, out);
        lower_bound(wm, rm, "minItems", path, out);
        let unique = |m: &Map<String, Value>| m.get("uniqueItems") == Some(&Value::Bool(true));
        if unique(rm) && !unique(wm) {
            out.push(format!(
                "{}: the reader requires unique items",
                join(path, "uniqueItems")
            ));
        }
    }
}

fn typed_shape(t: &str, m: Map<String, Value>) -> Shape {
    match t {
        "null" => Shape::Null,
        "boolean" => Shape::Boolean,
        "integer" => Shape::Number { integer: true, m },
        "number" => Shape::Number { integer: false, m },
        "string" => Shape::String(m),
        "object" => Shape::Object(m),
        "array" => Shape::Array(m),
        _ => Shape::Any,
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

/// How an array schema treats items past its tuple.
enum Extra {
    Open,
    Partial(Value),
    Closed,
}

/// An array schema's tuple (`items` as an array, or `prefixItems`), its
/// schema for all items (when there is no tuple), and what it does past
/// the tuple.
fn array_parts(m: &Map<String, Value>) -> (Vec<Value>, Option<Value>, Extra) {
    let extra_of = |v: Option<&Value>| match v {
        Some(Value::Bool(false)) => Extra::Closed,
        Some(v) if !is_any(v) => Extra::Partial(v.clone()),
        _ => Extra::Open,
    };
    if let Some(Value::Array(prefix)) = m.get("prefixItems") {
        return (prefix.clone(), None, extra_of(m.get("items")));
    }
    match m.get("items") {
        Some(Value::Array(tuple)) => (tuple.clone(), None, extra_of(m.get("additionalItems"))),
        Some(all) => (Vec::new(), Some(all.clone()), Extra::Open),
        None => (Vec::new(), None, Extra::Open),
    }
}

/// A maximum bound (`maxLength`, `maximum`...): added or lowered by the
/// reader is incompatible.
fn upper_bound(
    w: &Map<String, Value>,
    r: &Map<String, Value>,
    key: &str,
    path: &str,
    out: &mut Vec<String>,
) {
    match (num(w, key), num(r, key)) {
        (None, Some(b)) => out.push(format!("{}: the reader added {key} {b}", join(path, key))),
        (Some(a), Some(b)) if b < a => out.push(format!(
            "{}: the reader lowered {key} from {a} to {b}",
            join(path, key)
        )),
        _ => {}
    }
}

/// A minimum bound: added or raised by the reader is incompatible.
fn lower_bound(
    w: &Map<String, Value>,
    r: &Map<String, Value>,
    key: &str,
    path: &str,
    out: &mut Vec<String>,
) {
    match (num(w, key), num(r, key)) {
        (None, Some(b)) => out.push(format!("{}: the reader added {key} {b}", join(path, key))),
        (Some(a), Some(b)) if b > a => out.push(format!(
            "{}: the reader raised {key} from {a} to {b}",
            join(path, key)
        )),
        _ => {}
    }
}

/// The size of a maximum matching between left nodes (with their edges to
/// right nodes) and `right` right nodes: augmenting paths, fine for the
/// few subschemas a combination has.
fn max_matching(edges: &[Vec<usize>], right: usize) -> usize {
    fn augment(
        l: usize,
        edges: &[Vec<usize>],
        seen: &mut [bool],
        owner: &mut [Option<usize>],
    ) -> bool {
        for &r in &edges[l] {
            if seen[r] {
                continue;
            }
            seen[r] = true;
            if owner[r].is_none_or(|o| augment(o, edges, seen, owner)) {
                owner[r] = Some(l);
                return true;
            }
        }
        false
    }
    let mut owner = vec![None; right];
    (0..edges.len())
        .filter(|&l| augment(l, edges, &mut vec![false; right], &mut owner))
        .count()
}
