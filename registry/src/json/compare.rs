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

mod arrays;
mod objects;

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
            (_, Shape::Combined(crit, subs))
                if (subs.len() == 1 || *crit != Crit::All)
                    && subs.iter().any(|s| self.reads(w, s)) =>
            {
                return;
            }
            // A writer combination read by a plain reader: every document
            // of a writer `allOf` is valid under each of its subschemas, so
            // one read is enough; one of a writer `anyOf`/`oneOf` may come
            // from any subschema, so all must be read. (Beyond Confluent,
            // which reads a single subschema only, but sound.)
            (Shape::Combined(crit, subs), _)
                if if *crit == Crit::All {
                    subs.iter().any(|s| self.reads(s, r))
                } else {
                    subs.iter().all(|s| self.reads(s, r))
                } =>
            {
                return;
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
            // Refusing what `rn` accepts must refuse no more than refusing
            // what `wn` accepts: `wn` reads `rn`.
            (Shape::Not(wn), Shape::Not(rn)) if !self.reads(&rn, &wn) => {
                out.push(format!(
                    "{path}/not: the reader refuses documents the writer's \"not\" allowed"
                ));
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
