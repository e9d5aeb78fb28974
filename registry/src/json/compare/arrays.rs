//! Array schemas: `items`, tuples (`items` arrays, `prefixItems`) under
//! open, partially open and closed content models, `additionalItems`, the
//! item-count bounds and `uniqueItems`.

use serde_json::{Map, Value};

use super::{is_any, is_false, join, lower_bound, upper_bound, Comparer, Sub};

impl Comparer<'_> {
    pub(super) fn compare_arrays(
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
