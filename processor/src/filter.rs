//! Filter predicates, run as Arrow comparison kernels over a decoded batch:
//! each condition gives a mask (a record lacking the field, or holding a
//! value of another type, fails it), an `any` item's masks are combined
//! with OR, the items' with AND, and every column is filtered by the
//! result in one pass per column.
//!
//! A mask has no nulls (a null comparison is a failed condition), so
//! two-valued AND and OR over its bits (`BooleanBuffer`'s `&` and `|`, the
//! bitwise kernels arrow-arith's `and`/`or` run on arrays without nulls)
//! give what Kleene logic would keep: with `any: [a, b]`, a record lacking
//! `a`'s field is kept when `b` holds.

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, UInt64Type};
use arrow_array::{Array, BooleanArray, Datum, Float64Array, Scalar, StringArray};
use arrow_buffer::BooleanBuffer;
use arrow_schema::ArrowError;

use crate::decode::Columns;
use crate::pipeline::{Filter, FilterOp, Pipeline, Scalar as Value};

/// A pipeline's filters, ready to run.
pub struct Predicates {
    /// The filter's items, each one condition or `any` of several.
    items: Vec<Vec<Condition>>,
}

struct Condition {
    op: FilterOp,
    /// One scalar per value compared with (one but for `in`).
    operands: Vec<Box<dyn Datum + Send + Sync>>,
}

impl Predicates {
    pub fn new(pipeline: &Pipeline) -> Predicates {
        Predicates {
            items: pipeline
                .filter
                .iter()
                .map(|item| item.conditions().iter().map(Condition::new).collect())
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// `cols` keeping only the records every item holds for; how many
    /// were filtered out.
    pub fn apply(&self, cols: Columns) -> Result<(Columns, usize), ArrowError> {
        if self.items.is_empty() || cols.is_empty() {
            return Ok((cols, 0));
        }
        // one column per condition, in the items' order
        let mut columns = cols.filtered_by.iter();
        let mut keep: Option<BooleanBuffer> = None;
        for any in &self.items {
            let mut holds: Option<BooleanBuffer> = None;
            for (c, column) in any.iter().zip(columns.by_ref()) {
                let mask = c.mask(column.as_ref())?;
                holds = Some(match holds {
                    Some(h) => &h | &mask,
                    None => mask,
                });
            }
            let Some(holds) = holds else {
                continue;
            };
            keep = Some(match keep {
                Some(k) => &k & &holds,
                None => holds,
            });
        }
        let Some(keep) = keep else {
            return Ok((cols, 0));
        };
        let kept = keep.count_set_bits();
        let dropped = cols.len() - kept;
        if dropped == 0 {
            return Ok((cols, 0));
        }
        let mask = BooleanArray::new(keep, None);
        let take = |a: &dyn Array| arrow_select::filter::filter(a, &mask);
        let filtered = Columns {
            keys: take(&cols.keys)?.as_string::<i32>().clone(),
            event_times: take(&cols.event_times)?.as_primitive::<Int64Type>().clone(),
            offsets: take(&cols.offsets)?.as_primitive::<Int64Type>().clone(),
            values: cols
                .values
                .iter()
                .map(|v| Ok(take(v)?.as_primitive::<Float64Type>().clone()))
                .collect::<Result<_, ArrowError>>()?,
            hashes: cols
                .hashes
                .iter()
                .map(|v| Ok(take(v)?.as_primitive::<UInt64Type>().clone()))
                .collect::<Result<_, ArrowError>>()?,
            filtered_by: Vec::new(),
            max_event_time: cols.max_event_time,
        };
        Ok((filtered, dropped))
    }
}

impl Condition {
    fn new(f: &Filter) -> Condition {
        let operands = f
            .operands()
            .into_iter()
            .map(|v| -> Box<dyn Datum + Send + Sync> {
                match v {
                    Value::Number(n) => Box::new(Scalar::new(Float64Array::from(vec![*n]))),
                    Value::Text(t) => Box::new(Scalar::new(StringArray::from(vec![t.as_str()]))),
                }
            })
            .collect();
        Condition { op: f.op, operands }
    }

    /// Which rows hold; a null (no such field) never does.
    fn mask(&self, column: &dyn Array) -> Result<BooleanBuffer, ArrowError> {
        use arrow_ord::cmp;
        let mut out: Option<BooleanBuffer> = None;
        for operand in &self.operands {
            let b = operand.as_ref();
            let r = match self.op {
                FilterOp::Eq | FilterOp::In => cmp::eq(&column, b)?,
                FilterOp::Ne => cmp::neq(&column, b)?,
                FilterOp::Lt => cmp::lt(&column, b)?,
                FilterOp::Le => cmp::lt_eq(&column, b)?,
                FilterOp::Gt => cmp::gt(&column, b)?,
                FilterOp::Ge => cmp::gt_eq(&column, b)?,
            };
            let definite = match r.nulls() {
                Some(nulls) => r.values() & nulls.inner(),
                None => r.values().clone(),
            };
            // `in`: any of the values
            out = Some(match out {
                Some(o) => &o | &definite,
                None => definite,
            });
        }
        Ok(out.unwrap_or_else(|| BooleanBuffer::new_unset(column.len())))
    }
}

#[cfg(test)]
#[path = "filter_tests.rs"]
mod tests;
