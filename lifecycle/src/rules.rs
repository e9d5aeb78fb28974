//! The lifecycle rules AeroStream relies on, and how a bucket's rules are
//! judged and merged. Pure functions over a plain view of each rule: no IO,
//! no SDK types, so every case is a unit test.
//!
//! Two rules are relied on (see `docs/tiering.md`, "Bucket lifecycle rules"):
//!
//! 1. abort incomplete multipart uploads under the cluster's prefix: an
//!    upload a crashed agent never completed is invisible but billed;
//! 2. expire objects under `{prefix}/tombstones/` (the layout constant
//!    [`cache::layout::TOMBSTONES_DIR`]) after some days: retention and topic
//!    deletion move objects there with `--object-store-tombstones true`.
//!
//! A rule satisfies a requirement when it is enabled, its filter is a plain
//! key prefix (no tag or size condition) and:
//! - abort: the prefix covers `{prefix}/topics/` and `{prefix}/packs/` (the
//!   only keys AeroStream uploads in parts; a whole-bucket rule does too)
//!   and it sets `DaysAfterInitiation`;
//! - tombstones: the prefix is `{prefix}/tombstones/` exactly (without its
//!   trailing slash too) and it expires objects after a number of days.
//!
//! What `--apply` changes is planned in [`crate::merge`].

use cache::layout::{PACKS_DIR, TOMBSTONES_DIR, TOPICS_DIR};

/// Days after which an incomplete multipart upload is aborted (as the
/// terraform modules and `terraform/lifecycle/*.json` set it).
pub const ABORT_MULTIPART_AFTER_DAYS: i32 = 2;
/// Days a tombstoned object stays recoverable.
pub const TOMBSTONE_EXPIRY_DAYS: i32 = 7;
/// Days a replaced or deleted version is kept when versioning is on.
pub const NONCURRENT_VERSION_DAYS: i32 = 1;

/// The key prefixes of one cluster in its bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `""` or `"cluster-1/"`: every key of the cluster starts with it.
    root: String,
}

impl Layout {
    /// The layout under `prefix`, the path part of the `--object-store` URL
    /// (`cluster-1`, `a/b`, or empty for the whole bucket).
    pub fn new(prefix: &str) -> Self {
        let p = prefix.trim_matches('/');
        Layout {
            root: if p.is_empty() {
                String::new()
            } else {
                format!("{p}/")
            },
        }
    }

    /// `""` or `"cluster-1/"`.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// `{prefix}/topics/`: live segment objects.
    pub fn topics(&self) -> String {
        format!("{}{TOPICS_DIR}/", self.root)
    }

    /// `{prefix}/packs/`: live packed objects.
    pub fn packs(&self) -> String {
        format!("{}{PACKS_DIR}/", self.root)
    }

    /// Where live data lies: segments and packed objects, both uploaded in
    /// parts when large.
    pub fn live(&self) -> [String; 2] {
        [self.topics(), self.packs()]
    }

    /// Whether a rule with `prefix` acts on every live key.
    pub(crate) fn covers_live(&self, prefix: &str) -> bool {
        self.live().iter().all(|d| d.starts_with(prefix))
    }

    /// `{prefix}/tombstones/`: deleted objects awaiting expiry.
    pub fn tombstones(&self) -> String {
        format!("{}{TOMBSTONES_DIR}/", self.root)
    }

    /// What the bucket should hold for `req`.
    pub fn wanted(&self, req: Requirement) -> WantedRule {
        match req {
            Requirement::AbortIncompleteUploads => WantedRule {
                requirement: req,
                prefix: self.root.clone(),
                abort_days: Some(ABORT_MULTIPART_AFTER_DAYS),
                expiration_days: None,
                noncurrent_days: None,
            },
            Requirement::ExpireTombstones => WantedRule {
                requirement: req,
                prefix: self.tombstones(),
                abort_days: None,
                expiration_days: Some(TOMBSTONE_EXPIRY_DAYS),
                // with versioning on, an expiry alone leaves a billed copy
                noncurrent_days: Some(NONCURRENT_VERSION_DAYS),
            },
        }
    }
}

/// A lifecycle rule AeroStream relies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Requirement {
    AbortIncompleteUploads,
    ExpireTombstones,
}

impl Requirement {
    /// Both, in the order they are reported.
    pub const ALL: [Requirement; 2] = [
        Requirement::AbortIncompleteUploads,
        Requirement::ExpireTombstones,
    ];

    /// The rule id AeroStream (and the terraform modules) give this rule.
    pub fn id(self) -> &'static str {
        match self {
            Requirement::AbortIncompleteUploads => "aerostream-abort-incomplete-multipart-uploads",
            Requirement::ExpireTombstones => "aerostream-expire-tombstones",
        }
    }

    /// What the rule does, for people.
    pub fn describe(self, layout: &Layout) -> String {
        match self {
            Requirement::AbortIncompleteUploads => format!(
                "abort incomplete multipart uploads under {}",
                shown(layout.root())
            ),
            Requirement::ExpireTombstones => {
                format!("expire deleted objects under {}", layout.tombstones())
            }
        }
    }

    /// Whether `id` is this rule's id or one AeroStream derived from it.
    pub(crate) fn owns_id(self, id: &str) -> bool {
        id == self.id()
            || id
                .strip_prefix(self.id())
                .is_some_and(|rest| rest.starts_with('-'))
    }
}

/// A prefix for messages: the empty prefix is the whole bucket.
pub(crate) fn shown(prefix: &str) -> String {
    if prefix.is_empty() {
        "the whole bucket".to_string()
    } else {
        prefix.to_string()
    }
}

/// Which keys a rule applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// Every key starting with this (empty: the whole bucket).
    Prefix(String),
    /// A prefix with tag or object-size conditions: only some of its keys.
    Conditional(String),
}

impl Filter {
    pub(crate) fn prefix(&self) -> &str {
        match self {
            Filter::Prefix(p) | Filter::Conditional(p) => p,
        }
    }
}

/// What a rule does to current objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiration {
    None,
    Days(i32),
    /// On a fixed date, once: not a standing rule.
    Date,
    /// Only removes expired delete markers (deletes no data).
    DeleteMarkersOnly,
}

/// The parts of one lifecycle rule that matter here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleView {
    pub id: Option<String>,
    pub enabled: bool,
    pub filter: Filter,
    /// The rule has an abort-multipart action ...
    pub has_abort: bool,
    /// ... and this many days in it.
    pub abort_days: Option<i32>,
    pub expiration: Expiration,
    pub noncurrent_days: Option<i32>,
}

impl RuleView {
    fn name(&self, index: usize) -> String {
        match &self.id {
            Some(id) if !id.is_empty() => format!("\"{id}\""),
            _ => format!("#{} (no id)", index + 1),
        }
    }
}

/// The rule AeroStream installs for a requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedRule {
    pub requirement: Requirement,
    pub prefix: String,
    pub abort_days: Option<i32>,
    pub expiration_days: Option<i32>,
    pub noncurrent_days: Option<i32>,
}

/// How a requirement stands in the bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Met by the rule at this index.
    Present { index: usize, rule: String },
    /// No rule is meant for it.
    Missing,
    /// A rule meant for it (by id or by prefix) does not do the job.
    Wrong {
        index: usize,
        rule: String,
        problems: Vec<String>,
    },
}

/// One requirement and how it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub requirement: Requirement,
    pub status: Status,
}

/// A rule that endangers data AeroStream still needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hazard {
    pub index: usize,
    pub rule: String,
    pub problem: String,
}

/// The verdict on a bucket's rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub findings: Vec<Finding>,
    pub hazards: Vec<Hazard>,
}

impl Report {
    /// Every relied-on rule present and nothing endangering live segments.
    pub fn all_good(&self) -> bool {
        self.hazards.is_empty()
            && self
                .findings
                .iter()
                .all(|f| matches!(f.status, Status::Present { .. }))
    }
}

/// Judges `rules` (a bucket's whole lifecycle configuration) for `layout`.
pub fn check(rules: &[RuleView], layout: &Layout) -> Report {
    let findings = Requirement::ALL
        .iter()
        .map(|&req| Finding {
            requirement: req,
            status: status_of(req, rules, layout),
        })
        .collect();
    Report {
        findings,
        hazards: hazards(rules, layout),
    }
}

/// Why `rule` does not meet `req` (empty: it does).
fn problems(req: Requirement, rule: &RuleView, layout: &Layout) -> Vec<String> {
    let mut out = Vec::new();
    if !rule.enabled {
        out.push("it is disabled".to_string());
    }
    if let Filter::Conditional(_) = rule.filter {
        out.push("its filter has tag or object-size conditions, so it skips some keys".to_string());
    }
    let prefix = rule.filter.prefix();
    match req {
        Requirement::AbortIncompleteUploads => {
            if !layout.covers_live(prefix) {
                out.push(format!(
                    "its prefix {} does not cover {}",
                    shown(prefix),
                    layout.live().join(" and ")
                ));
            }
            if rule.abort_days.is_none() {
                out.push("it sets no days after which to abort incomplete uploads".to_string());
            }
        }
        Requirement::ExpireTombstones => {
            let want = layout.tombstones();
            if prefix != want && prefix != want.trim_end_matches('/') {
                out.push(format!(
                    "its prefix {} differs from the tombstone prefix {want}",
                    shown(prefix)
                ));
            }
            match rule.expiration {
                Expiration::Days(_) => {}
                Expiration::Date => out.push(
                    "it expires objects on a fixed date, not a number of days after deletion"
                        .to_string(),
                ),
                Expiration::None | Expiration::DeleteMarkersOnly => {
                    out.push("it sets no days after which objects expire".to_string())
                }
            }
        }
    }
    out
}

/// Whether a rule that is not AeroStream's by id is still about `req` here:
/// it acts on this cluster's keys in the way `req` needs.
fn aimed_at(req: Requirement, rule: &RuleView, layout: &Layout) -> bool {
    let p = rule.filter.prefix();
    match req {
        Requirement::AbortIncompleteUploads => {
            rule.has_abort
                && (layout.live().iter().any(|d| d.starts_with(p)) || p.starts_with(layout.root()))
        }
        Requirement::ExpireTombstones => {
            let want = layout.tombstones();
            want.trim_end_matches('/') == p.trim_end_matches('/')
                || (p.starts_with(&want) && rule.expiration != Expiration::None)
        }
    }
}

fn status_of(req: Requirement, rules: &[RuleView], layout: &Layout) -> Status {
    if let Some((index, rule)) = rules
        .iter()
        .enumerate()
        .find(|(_, r)| problems(req, r, layout).is_empty())
    {
        return Status::Present {
            index,
            rule: rule.name(index),
        };
    }
    // The closest miss: AeroStream's own id first, then a derived id, then
    // a rule of the user's aimed at the same keys.
    let by_id = |exact: bool| {
        rules.iter().enumerate().find(|(_, r)| {
            r.id.as_deref().is_some_and(|id| {
                if exact {
                    id == req.id()
                } else {
                    req.owns_id(id)
                }
            })
        })
    };
    let near = by_id(true).or_else(|| by_id(false)).or_else(|| {
        rules
            .iter()
            .enumerate()
            .find(|(_, r)| aimed_at(req, r, layout))
    });
    match near {
        Some((index, rule)) => Status::Wrong {
            index,
            rule: rule.name(index),
            problems: problems(req, rule, layout),
        },
        None => Status::Missing,
    }
}

/// Enabled rules that expire current objects under `{prefix}/topics/` or
/// `{prefix}/packs/`: retention is AeroStream's job, and a segment the
/// metastore still lists must stay readable.
fn hazards(rules: &[RuleView], layout: &Layout) -> Vec<Hazard> {
    let live = layout.live();
    rules
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            r.enabled && matches!(r.expiration, Expiration::Days(_) | Expiration::Date)
        })
        .filter_map(|(index, r)| {
            let p = r.filter.prefix();
            let hit = live
                .iter()
                .find(|d| d.starts_with(p) || p.starts_with(d.as_str()))?;
            Some((index, r, hit))
        })
        .map(|(index, r, hit)| Hazard {
            index,
            rule: r.name(index),
            problem: format!(
                "it expires current objects under {}, where the live segments ({hit}) are: \
                 they would vanish while the cluster still reads them (retention is \
                 AeroStream's job; remove the rule or narrow its prefix)",
                shown(r.filter.prefix())
            ),
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn rule(id: &str, prefix: &str) -> RuleView {
        RuleView {
            id: Some(id.to_string()),
            enabled: true,
            filter: Filter::Prefix(prefix.to_string()),
            has_abort: false,
            abort_days: None,
            expiration: Expiration::None,
            noncurrent_days: None,
        }
    }

    pub(crate) fn abort(id: &str, prefix: &str, days: Option<i32>) -> RuleView {
        RuleView {
            has_abort: true,
            abort_days: days,
            ..rule(id, prefix)
        }
    }

    pub(crate) fn expire(id: &str, prefix: &str, days: i32) -> RuleView {
        RuleView {
            expiration: Expiration::Days(days),
            ..rule(id, prefix)
        }
    }

    pub(crate) fn status(report: &Report, req: Requirement) -> &Status {
        &report
            .findings
            .iter()
            .find(|f| f.requirement == req)
            .unwrap()
            .status
    }
    #[test]
    fn an_empty_configuration_misses_both_rules() {
        let layout = Layout::new("cluster-1");
        let report = check(&[], &layout);
        assert!(!report.all_good());
        for req in Requirement::ALL {
            assert_eq!(status(&report, req), &Status::Missing);
        }
    }

    #[test]
    fn the_terraform_rules_pass() {
        // as terraform/modules/s3-bucket writes them: abort over the whole bucket
        let layout = Layout::new("cluster-1");
        let rules = [
            abort("aerostream-abort-incomplete-multipart-uploads", "", Some(2)),
            RuleView {
                noncurrent_days: Some(1),
                ..expire("aerostream-expire-tombstones", "cluster-1/tombstones/", 7)
            },
            RuleView {
                expiration: Expiration::DeleteMarkersOnly,
                noncurrent_days: Some(1),
                ..rule("aerostream-expire-replaced-versions", "cluster-1/topics/")
            },
        ];
        let report = check(&rules, &layout);
        assert!(report.all_good(), "{report:?}");
    }

    #[test]
    fn rules_under_other_ids_count_when_they_do_the_job() {
        let layout = Layout::new("a/b");
        let rules = [
            abort("user-abort", "a/", Some(5)),
            expire("my-tombstones", "a/b/tombstones", 30),
        ];
        let report = check(&rules, &layout);
        assert!(report.all_good(), "{report:?}");
    }

    #[test]
    fn a_tombstone_rule_with_another_prefix_is_reported_wrong() {
        let layout = Layout::new("cluster-1");
        let rules = [expire(
            "aerostream-expire-tombstones",
            "cluster-1/tombstone/",
            7,
        )];
        let report = check(&rules, &layout);
        match status(&report, Requirement::ExpireTombstones) {
            Status::Wrong { problems, .. } => {
                assert_eq!(problems.len(), 1, "{problems:?}");
                assert!(
                    problems[0].contains("cluster-1/tombstones/"),
                    "{problems:?}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_abort_rule_without_days_or_disabled_is_reported_wrong() {
        let layout = Layout::new("p");
        let no_days = [abort(
            "aerostream-abort-incomplete-multipart-uploads",
            "p/",
            None,
        )];
        let Status::Wrong { problems, .. } = status(
            &check(&no_days, &layout),
            Requirement::AbortIncompleteUploads,
        )
        .clone() else {
            panic!("a rule without days passed")
        };
        assert!(problems[0].contains("no days"), "{problems:?}");

        let disabled = [RuleView {
            enabled: false,
            ..abort("someone-else", "p/", Some(2))
        }];
        let Status::Wrong { problems, .. } = status(
            &check(&disabled, &layout),
            Requirement::AbortIncompleteUploads,
        )
        .clone() else {
            panic!("a disabled rule passed")
        };
        assert_eq!(problems, vec!["it is disabled".to_string()]);
    }

    #[test]
    fn a_narrower_or_conditional_abort_rule_does_not_count() {
        let layout = Layout::new("p");
        let rules = [
            abort("x", "p/topics/some-topic/", Some(2)),
            RuleView {
                filter: Filter::Conditional("p/".into()),
                ..abort("y", "p/", Some(2))
            },
        ];
        assert!(matches!(
            status(&check(&rules, &layout), Requirement::AbortIncompleteUploads),
            Status::Wrong { .. }
        ));
    }

    #[test]
    fn a_rule_expiring_live_segments_is_a_hazard() {
        let layout = Layout::new("c");
        let rules = [
            abort(
                "aerostream-abort-incomplete-multipart-uploads",
                "c/",
                Some(2),
            ),
            expire("aerostream-expire-tombstones", "c/tombstones/", 7),
            expire("cleanup", "", 90),
        ];
        let report = check(&rules, &layout);
        assert_eq!(report.hazards.len(), 1);
        assert_eq!(report.hazards[0].index, 2);
        assert!(!report.all_good());
        // another cluster's data is not ours to judge
        let other = [expire("cleanup", "d/topics/", 90)];
        assert!(check(&other, &layout).hazards.is_empty());
        // packed objects are live data too
        let packs = [expire("old-packs", "c/packs/", 30)];
        let report = check(&packs, &layout);
        assert_eq!(report.hazards.len(), 1);
        assert!(
            report.hazards[0].problem.contains("c/packs/"),
            "{:?}",
            report.hazards[0]
        );
    }

    #[test]
    fn an_abort_rule_must_reach_packed_objects_as_well_as_segments() {
        let layout = Layout::new("c");
        let only_segments = [abort(
            "aerostream-abort-incomplete-multipart-uploads",
            "c/topics/",
            Some(2),
        )];
        let report = check(&only_segments, &layout);
        let Status::Wrong { problems, .. } = status(&report, Requirement::AbortIncompleteUploads)
        else {
            panic!("a rule that misses c/packs/ passed")
        };
        assert!(
            problems.iter().any(|p| p.contains("c/packs/")),
            "{problems:?}"
        );
    }

    /// The ready-made S3 file of `terraform/lifecycle/` passes the check it
    /// is written for: the file and the checker agree on ids and prefixes.
    #[test]
    fn the_shipped_s3_lifecycle_file_passes_the_check() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../terraform/lifecycle/s3-lifecycle.json"
        );
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let days = |v: &serde_json::Value, a: &str, b: &str| {
            v.get(a)
                .and_then(|x| x.get(b))
                .and_then(|d| d.as_i64())
                .map(|d| d as i32)
        };
        let rules: Vec<RuleView> = json["Rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| RuleView {
                id: r["ID"].as_str().map(str::to_string),
                enabled: r["Status"] == "Enabled",
                filter: Filter::Prefix(r["Filter"]["Prefix"].as_str().unwrap_or("").to_string()),
                has_abort: r.get("AbortIncompleteMultipartUpload").is_some(),
                abort_days: days(r, "AbortIncompleteMultipartUpload", "DaysAfterInitiation"),
                expiration: match days(r, "Expiration", "Days") {
                    Some(d) => Expiration::Days(d),
                    None if r.get("Expiration").is_some() => Expiration::DeleteMarkersOnly,
                    None => Expiration::None,
                },
                noncurrent_days: days(r, "NoncurrentVersionExpiration", "NoncurrentDays"),
            })
            .collect();
        let report = check(&rules, &Layout::new("cluster-1"));
        assert!(report.all_good(), "{report:?}");
        for f in &report.findings {
            let Status::Present { rule, .. } = &f.status else {
                unreachable!()
            };
            assert_eq!(rule, &format!("\"{}\"", f.requirement.id()));
        }
    }

    #[test]
    fn a_bucket_without_prefix_is_laid_out_at_the_root() {
        let layout = Layout::new("");
        assert_eq!(layout.topics(), "topics/");
        assert_eq!(layout.packs(), "packs/");
        assert_eq!(layout.tombstones(), "tombstones/");
        assert_eq!(
            Requirement::AbortIncompleteUploads.describe(&layout),
            "abort incomplete multipart uploads under the whole bucket"
        );
        assert_eq!(Layout::new("/a/b/").root(), "a/b/");
    }
}
