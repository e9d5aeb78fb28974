//! Merging the wanted rules into a bucket's rules: what `--apply` changes.
//! Pure, like [`crate::rules`]: S3's [`crate::s3::merge`] performs the plan.
//!
//! Merging never removes or edits a rule that is not AeroStream's: a rule
//! with AeroStream's id that targets this cluster's keys is fixed in place;
//! anything else (for example the same id naming another cluster's prefix in
//! a shared bucket) is left as it is and a new rule with a fresh id is added.

use crate::rules::{shown, Filter, Layout, Report, Requirement, RuleView, Status, WantedRule};

/// One edit of the bucket's rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Append a new rule with this id.
    Add { id: String, rule: WantedRule },
    /// Fix AeroStream's rule at `index` in place: enable it and set the
    /// missing action; its id, filter and other actions stay.
    Fix {
        index: usize,
        rule: String,
        wanted: WantedRule,
        problems: Vec<String>,
    },
}

/// What `--apply` does: the changes that make [`crate::rules::check`] pass for both
/// requirements, and the rules it leaves alone that the user should look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub changes: Vec<Change>,
    /// Rules reported wrong that are not edited (not clearly AeroStream's
    /// rule for this prefix), with why.
    pub left_alone: Vec<String>,
}

/// Plans the merge of the wanted rules into `rules`. Rules not named in a
/// [`Change::Fix`] are kept exactly as they are.
pub fn plan(rules: &[RuleView], layout: &Layout, report: &Report) -> Plan {
    let mut taken: Vec<String> = rules.iter().filter_map(|r| r.id.clone()).collect();
    let mut changes = Vec::new();
    let mut left_alone = Vec::new();
    for finding in &report.findings {
        let req = finding.requirement;
        let wanted = layout.wanted(req);
        match &finding.status {
            Status::Present { .. } => {}
            Status::Wrong {
                index,
                rule,
                problems,
            } if fixable_in_place(req, &rules[*index], layout) => changes.push(Change::Fix {
                index: *index,
                rule: rule.clone(),
                wanted,
                problems: problems.clone(),
            }),
            status => {
                if let Status::Wrong { rule, problems, .. } = status {
                    left_alone.push(format!(
                        "rule {rule} left as it is ({}): remove it if it was meant for {}",
                        problems.join("; "),
                        shown(layout.root())
                    ));
                }
                let id = fresh_id(req, layout, &taken);
                taken.push(id.clone());
                changes.push(Change::Add { id, rule: wanted });
            }
        }
    }
    Plan {
        changes,
        left_alone,
    }
}

/// A rule is fixed in place only when it carries AeroStream's id and already
/// targets this cluster's keys: then it can only be ours. Its filter must be
/// a plain prefix, since a fix keeps the filter.
fn fixable_in_place(req: Requirement, rule: &RuleView, layout: &Layout) -> bool {
    let ours = rule.id.as_deref().is_some_and(|id| req.owns_id(id));
    let Filter::Prefix(p) = &rule.filter else {
        return false;
    };
    ours && match req {
        Requirement::AbortIncompleteUploads => layout.covers_live(p.as_str()),
        Requirement::ExpireTombstones => {
            p.trim_end_matches('/') == layout.tombstones().trim_end_matches('/')
        }
    }
}

/// The requirement's id if free, else one naming the prefix, else numbered.
fn fresh_id(req: Requirement, layout: &Layout, taken: &[String]) -> String {
    let free = |id: &str| !taken.iter().any(|t| t == id);
    if free(req.id()) {
        return req.id().to_string();
    }
    let tail: String = layout
        .root()
        .trim_end_matches('/')
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let base = if tail.is_empty() {
        req.id().to_string()
    } else {
        format!("{}-{tail}", req.id())
    };
    if free(&base) {
        return base;
    }
    (2..)
        .map(|n| format!("{base}-{n}"))
        .find(|id| free(id))
        .unwrap_or(base)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::tests::{abort, expire, rule, status};
    use crate::rules::{check, Expiration};

    /// `rules` after `plan`, as the S3 merge applies it.
    fn apply(rules: &[RuleView], plan: &Plan) -> Vec<RuleView> {
        let mut out = rules.to_vec();
        for c in &plan.changes {
            match c {
                Change::Add { id, rule } => out.push(RuleView {
                    id: Some(id.clone()),
                    enabled: true,
                    filter: Filter::Prefix(rule.prefix.clone()),
                    has_abort: rule.abort_days.is_some(),
                    abort_days: rule.abort_days,
                    expiration: rule
                        .expiration_days
                        .map_or(Expiration::None, Expiration::Days),
                    noncurrent_days: rule.noncurrent_days,
                }),
                Change::Fix { index, wanted, .. } => {
                    let r = &mut out[*index];
                    r.enabled = true;
                    if wanted.abort_days.is_some() && r.abort_days.is_none() {
                        r.has_abort = true;
                        r.abort_days = wanted.abort_days;
                    }
                    if let Some(d) = wanted.expiration_days {
                        if !matches!(r.expiration, Expiration::Days(_)) {
                            r.expiration = Expiration::Days(d);
                        }
                    }
                }
            }
        }
        out
    }
    #[test]
    fn merging_adds_the_missing_rules_and_keeps_the_users_rules() {
        let layout = Layout::new("cluster-1");
        let user = RuleView {
            expiration: Expiration::Days(30),
            ..rule("logs-expire", "logs/")
        };
        let rules = vec![user.clone()];
        let report = check(&rules, &layout);
        let plan = plan(&rules, &layout, &report);
        assert_eq!(plan.changes.len(), 2);
        assert!(plan.left_alone.is_empty());
        let merged = apply(&rules, &plan);
        assert_eq!(merged[0], user, "the user's rule changed");
        assert_eq!(merged.len(), 3);
        assert!(check(&merged, &layout).all_good());
        assert_eq!(
            merged[1].id.as_deref(),
            Some("aerostream-abort-incomplete-multipart-uploads")
        );
        assert_eq!(merged[1].filter, Filter::Prefix("cluster-1/".into()));
        assert_eq!(
            merged[2].filter,
            Filter::Prefix("cluster-1/tombstones/".into())
        );
    }

    #[test]
    fn our_own_rule_is_fixed_in_place_when_it_targets_this_prefix() {
        let layout = Layout::new("cluster-1");
        let rules = vec![
            RuleView {
                enabled: false,
                ..expire("aerostream-expire-tombstones", "cluster-1/tombstones/", 7)
            },
            abort("aerostream-abort-incomplete-multipart-uploads", "", None),
        ];
        let report = check(&rules, &layout);
        let plan = plan(&rules, &layout, &report);
        assert!(plan.changes.iter().all(|c| matches!(c, Change::Fix { .. })));
        let merged = apply(&rules, &plan);
        assert_eq!(merged.len(), 2, "nothing added");
        assert!(check(&merged, &layout).all_good());
        // the whole-bucket filter stays as it was
        assert_eq!(merged[1].filter, Filter::Prefix(String::new()));
    }

    #[test]
    fn another_clusters_rule_with_our_id_is_left_alone_and_a_new_one_added() {
        // a bucket shared by two clusters: cluster-2 checks after cluster-1 applied
        let layout = Layout::new("cluster-2");
        let theirs = RuleView {
            noncurrent_days: Some(1),
            ..expire("aerostream-expire-tombstones", "cluster-1/tombstones/", 7)
        };
        let rules = vec![
            abort("aerostream-abort-incomplete-multipart-uploads", "", Some(2)),
            theirs.clone(),
        ];
        let report = check(&rules, &layout);
        assert!(matches!(
            status(&report, Requirement::ExpireTombstones),
            Status::Wrong { .. }
        ));
        let plan = plan(&rules, &layout, &report);
        assert_eq!(plan.left_alone.len(), 1);
        let Change::Add { id, .. } = &plan.changes[0] else {
            panic!("{plan:?}")
        };
        assert_eq!(id, "aerostream-expire-tombstones-cluster-2");
        let merged = apply(&rules, &plan);
        assert_eq!(merged[1], theirs, "cluster-1's rule changed");
        assert!(check(&merged, &layout).all_good());
        // ids stay unique when the derived one is taken too
        let mut again = merged.clone();
        again[2].filter = Filter::Prefix("elsewhere/".into());
        let p = super::plan(&again, &layout, &check(&again, &layout));
        let Change::Add { id, .. } = &p.changes[0] else {
            panic!("{p:?}")
        };
        assert_eq!(id, "aerostream-expire-tombstones-cluster-2-2");
    }
}
