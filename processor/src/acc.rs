//! The figures kept per key and window: the record count; per aggregated
//! numeric field the count of values, their sum, min and max; per weighted
//! average the weighted sum and the sum of weights; per approximate
//! aggregate its sketch ([`crate::sketch`]). All of them merge, so a
//! sliding window is the merge of its panes.

use arrow_array::Array;
use serde::{Deserialize, Serialize};

use crate::decode::Columns;
use crate::pipeline::{AggregateOp, Pipeline};
use crate::sketch::{Distinct, Quantiles};

/// One aggregated field's running figures in one window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FieldAcc {
    /// Values seen (records lacking the field are not counted).
    pub n: i64,
    pub sum: f64,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl FieldAcc {
    pub(crate) fn add(&mut self, v: f64) {
        self.n += 1;
        self.sum += v;
        self.min = Some(self.min.map_or(v, |m| m.min(v)));
        self.max = Some(self.max.map_or(v, |m| m.max(v)));
    }

    pub(crate) fn merge(&mut self, o: &FieldAcc) {
        self.n += o.n;
        self.sum += o.sum;
        self.min = match (self.min, o.min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.max = match (self.max, o.max) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
}

/// One weighted average's running figures in one window: over the records
/// that have both fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WeightedAcc {
    pub n: i64,
    /// Sum of value * weight.
    pub sum_product: f64,
    pub sum_weight: f64,
}

impl WeightedAcc {
    pub(crate) fn merge(&mut self, o: &WeightedAcc) {
        self.n += o.n;
        self.sum_product += o.sum_product;
        self.sum_weight += o.sum_weight;
    }

    /// The weighted average; none without records or with weights summing
    /// to 0.
    pub fn value(&self) -> Option<f64> {
        (self.n > 0 && self.sum_weight != 0.0).then(|| self.sum_product / self.sum_weight)
    }
}

/// One key's window: its record count and per-field figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowAcc {
    pub count: i64,
    /// One per [`Pipeline::value_fields`], in that order.
    pub fields: Vec<FieldAcc>,
    /// One per `wavg` aggregate, in the pipeline's order.
    #[serde(default)]
    pub weighted: Vec<WeightedAcc>,
    /// One per `distinct` aggregate, in the pipeline's order.
    #[serde(default)]
    pub distinct: Vec<Distinct>,
    /// One per `quantile` aggregate, in the pipeline's order.
    #[serde(default)]
    pub quantiles: Vec<Quantiles>,
}

/// Where each aggregate's inputs are among a batch's columns.
#[derive(Clone, Debug, Default)]
pub struct Layout {
    /// How many numeric fields ([`Pipeline::value_fields`]).
    pub fields: usize,
    /// Per `wavg` aggregate, its value and weight field indexes.
    pub pairs: Vec<(usize, usize)>,
    /// Per `distinct` aggregate, its hash column index.
    pub distinct: Vec<usize>,
    /// Per `quantile` aggregate, its numeric field index.
    pub quantiles: Vec<usize>,
}

impl Layout {
    pub fn new(pipeline: &Pipeline) -> Layout {
        let fields = pipeline.value_fields();
        let hashed = pipeline.distinct_fields();
        let index = |among: &[String], f: &Option<String>| {
            f.as_ref()
                .and_then(|f| among.iter().position(|x| x == f))
                .unwrap_or(usize::MAX)
        };
        let of = |op: AggregateOp| pipeline.aggregates.iter().filter(move |a| a.op == op);
        Layout {
            fields: fields.len(),
            pairs: of(AggregateOp::Wavg)
                .map(|a| (index(&fields, &a.field), index(&fields, &a.weight)))
                .collect(),
            distinct: of(AggregateOp::Distinct)
                .map(|a| index(&hashed, &a.field))
                .collect(),
            quantiles: of(AggregateOp::Quantile)
                .map(|a| index(&fields, &a.field))
                .collect(),
        }
    }
}

impl WindowAcc {
    pub fn empty(layout: &Layout) -> WindowAcc {
        WindowAcc {
            count: 0,
            fields: vec![FieldAcc::default(); layout.fields],
            weighted: vec![WeightedAcc::default(); layout.pairs.len()],
            distinct: vec![Distinct::default(); layout.distinct.len()],
            quantiles: vec![Quantiles::default(); layout.quantiles.len()],
        }
    }

    /// Figures from a checkpoint of a pipeline file since given more
    /// aggregates: the new ones start empty.
    pub(crate) fn fit(mut self, layout: &Layout) -> WindowAcc {
        self.fields.resize(layout.fields, FieldAcc::default());
        self.weighted
            .resize(layout.pairs.len(), WeightedAcc::default());
        self.distinct
            .resize(layout.distinct.len(), Distinct::default());
        self.quantiles
            .resize(layout.quantiles.len(), Quantiles::default());
        self
    }

    pub(crate) fn merge(&mut self, o: &WindowAcc) {
        self.count += o.count;
        for (a, b) in self.fields.iter_mut().zip(&o.fields) {
            a.merge(b);
        }
        for (a, b) in self.weighted.iter_mut().zip(&o.weighted) {
            a.merge(b);
        }
        for (a, b) in self.distinct.iter_mut().zip(&o.distinct) {
            a.merge(b);
        }
        for (a, b) in self.quantiles.iter_mut().zip(&o.quantiles) {
            a.merge(b);
        }
    }

    /// Adds row `i` of `cols`.
    pub(crate) fn add(&mut self, cols: &Columns, i: usize, layout: &Layout) {
        self.count += 1;
        for (f, values) in self.fields.iter_mut().zip(&cols.values) {
            if values.is_valid(i) {
                f.add(values.value(i));
            }
        }
        for (d, &h) in self.distinct.iter_mut().zip(&layout.distinct) {
            if let Some(hashes) = cols.hashes.get(h).filter(|a| a.is_valid(i)) {
                d.insert(hashes.value(i));
            }
        }
        for (sketch, &v) in self.quantiles.iter_mut().zip(&layout.quantiles) {
            if let Some(values) = cols.values.get(v).filter(|a| a.is_valid(i)) {
                sketch.add(values.value(i));
            }
        }
        for (w, &(v, weight)) in self.weighted.iter_mut().zip(&layout.pairs) {
            let (Some(v), Some(weight)) = (cols.values.get(v), cols.values.get(weight)) else {
                continue;
            };
            if v.is_valid(i) && weight.is_valid(i) {
                w.n += 1;
                w.sum_product += v.value(i) * weight.value(i);
                w.sum_weight += weight.value(i);
            }
        }
    }
}
