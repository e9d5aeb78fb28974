//! Bucket lifecycle rules: are the ones AeroStream relies on in place, and
//! installing the missing ones.
//!
//! object_store, the data path's only cloud client, has no lifecycle API, so
//! this crate talks to S3 with the AWS SDK. It sits beside the data path,
//! never on it: only the `aerostream bucket check` command and a background
//! check at `aerostream serve` start-up use it, and no crate of the produce,
//! fetch or upload path depends on it (the agent links it behind its
//! `bucket-lifecycle` feature).
//!
//! - [`rules`]: the relied-on rules and the pure judging of a bucket's rules;
//! - [`merge`]: the pure plan of what `--apply` changes;
//! - [`s3`]: reading and writing an S3 bucket's configuration, with the same
//!   `AWS_*` settings as the broker's `s3://` store;
//! - [`Bucket`]: the two together for one `--object-store` URL.
//!
//! GCS and Azure are not checked: see [`Store::Unsupported`].
//!
//! ```no_run
//! # async fn f() -> Result<(), lifecycle::LifecycleError> {
//! use cache::StoreEnv;
//! use lifecycle::{Bucket, Store};
//!
//! let env = StoreEnv::from_process();
//! if let Store::S3 { bucket, layout } = lifecycle::store("s3://segments/cluster-1", &env)? {
//!     let b = Bucket::connect(bucket, layout, &env).await?;
//!     let checked = b.check().await?;
//!     for line in checked.lines(&b) {
//!         println!("{line}");
//!     }
//! }
//! # Ok(()) }
//! ```

pub mod merge;
pub mod rules;
pub mod s3;

use cache::StoreEnv;
use merge::{Change, Plan};
use rules::{Layout, Report, Requirement, RuleView, Status};

/// Why the lifecycle rules could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    #[error("invalid object store URL: {0}")]
    InvalidUrl(String),
    #[error("{0}")]
    Config(String),
    #[error(
        "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, \
         a web identity or instance credentials), as for the broker ({detail})"
    )]
    NoCredentials { detail: String },
    #[error("the AWS credentials were refused ({reason})")]
    BadCredentials { reason: String },
    #[error(
        "bucket {bucket} does not exist (check the bucket name, AWS_REGION and AWS_ENDPOINT_URL)"
    )]
    NoSuchBucket { bucket: String },
    #[error(
        "access denied: these credentials may not {action} the lifecycle configuration of bucket \
         {bucket} (it takes s3:GetLifecycleConfiguration, and s3:PutLifecycleConfiguration for --apply)"
    )]
    AccessDenied {
        bucket: String,
        action: &'static str,
    },
    #[error("cannot {action} the lifecycle configuration of bucket {bucket}: {detail}")]
    Request {
        bucket: String,
        action: &'static str,
        detail: String,
    },
}

/// What kind of store an `--object-store` URL names, for lifecycle purposes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Store {
    /// An S3 (or S3-compatible) bucket: checked here.
    S3 { bucket: String, layout: Layout },
    /// A cloud store whose lifecycle rules AeroStream cannot read: GCS keeps
    /// them in bucket metadata of its JSON API (object_store speaks the XML
    /// API, and no local emulator stores them); Azure keeps them in the
    /// storage account's management policy, an Azure Resource Manager call
    /// with its own credentials (Azurite has no such API).
    Unsupported { kind: &'static str, scheme: String },
    /// A local folder or memory: no lifecycle rules exist or are needed.
    Local,
}

/// Classifies `url` (the `--object-store` value).
pub fn store(url: &str, env: &StoreEnv) -> Result<Store, LifecycleError> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| {
        LifecycleError::InvalidUrl(format!(
            "{url}: expected SCHEME://..., e.g. s3://bucket/prefix"
        ))
    })?;
    let scheme = scheme.to_ascii_lowercase();
    match scheme.as_str() {
        "s3" | "s3a" => {
            // the broker's own parsing, so the prefix is the one it writes under
            let handle = cache::store_from_url(url, env)
                .map_err(|e| LifecycleError::InvalidUrl(e.to_string()))?;
            let bucket = rest.split('/').next().unwrap_or_default().to_string();
            Ok(Store::S3 {
                bucket,
                layout: Layout::new(handle.prefix.as_ref()),
            })
        }
        "gs" | "gcs" => Ok(Store::Unsupported {
            kind: "Google Cloud Storage",
            scheme,
        }),
        "az" | "azure" => Ok(Store::Unsupported {
            kind: "Azure Blob Storage",
            scheme,
        }),
        "file" | "memory" => Ok(Store::Local),
        other => Err(LifecycleError::InvalidUrl(format!(
            "{url}: unknown scheme {other:?}; use s3, gs or az"
        ))),
    }
}

/// Where the rules for a store this crate cannot check are written down.
pub fn terraform_pointer(kind: &str) -> String {
    let (module, file) = if kind.starts_with("Azure") {
        ("azure-container", "azure-lifecycle-policy.json")
    } else {
        ("gcs-bucket", "gcs-lifecycle.json")
    };
    format!(
        "set them with the terraform module terraform/modules/{module}, or apply \
         terraform/lifecycle/{file} (docs/tiering.md, \"Bucket lifecycle rules\")"
    )
}

/// One S3 bucket's lifecycle configuration, for one cluster prefix.
pub struct Bucket {
    client: aws_sdk_s3::Client,
    bucket: String,
    layout: Layout,
}

/// The configuration as read, and the verdict on it.
#[derive(Debug, Clone)]
pub struct Checked {
    pub current: s3::Current,
    pub views: Vec<RuleView>,
    pub report: Report,
}

impl Bucket {
    /// A client for `bucket` (no request is made yet).
    pub async fn connect(
        bucket: String,
        layout: Layout,
        env: &StoreEnv,
    ) -> Result<Bucket, LifecycleError> {
        Ok(Bucket {
            client: s3::client(env).await?,
            bucket,
            layout,
        })
    }

    pub fn name(&self) -> &str {
        &self.bucket
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Reads the rules and judges them.
    pub async fn check(&self) -> Result<Checked, LifecycleError> {
        let current = s3::read(&self.client, &self.bucket).await?;
        let views: Vec<RuleView> = current.rules.iter().map(s3::view).collect();
        let report = rules::check(&views, &self.layout);
        Ok(Checked {
            current,
            views,
            report,
        })
    }

    /// Installs what `checked` found missing or wrong, keeping every other
    /// rule; returns what was done (nothing when all was good).
    pub async fn apply(&self, checked: &Checked) -> Result<Plan, LifecycleError> {
        let plan = merge::plan(&checked.views, &self.layout, &checked.report);
        if !plan.changes.is_empty() {
            let merged = s3::merge(&checked.current.rules, &plan)?;
            s3::write(&self.client, &self.bucket, &checked.current, merged).await?;
        }
        Ok(plan)
    }
}

impl Checked {
    /// The report, one line per relied-on rule and per hazard.
    pub fn lines(&self, bucket: &Bucket) -> Vec<String> {
        report_lines(&self.report, &bucket.layout)
    }
}

/// One line per requirement (`ok`, `MISSING`, `WRONG`) and per hazard (`DANGER`).
pub fn report_lines(report: &Report, layout: &Layout) -> Vec<String> {
    let mut out: Vec<String> = report
        .findings
        .iter()
        .map(|f| {
            let what = f.requirement.describe(layout);
            match &f.status {
                Status::Present { rule, .. } => format!("ok       {what}: rule {rule}"),
                Status::Missing => format!("MISSING  {what}: no rule does it"),
                Status::Wrong { rule, problems, .. } => {
                    format!("WRONG    {what}: rule {rule}: {}", problems.join("; "))
                }
            }
        })
        .collect();
    out.extend(
        report
            .hazards
            .iter()
            .map(|h| format!("DANGER   rule {}: {}", h.rule, h.problem)),
    );
    out
}

/// What `--apply` did, one line per change and per rule left alone.
pub fn plan_lines(plan: &Plan, layout: &Layout) -> Vec<String> {
    let mut out: Vec<String> = plan
        .changes
        .iter()
        .map(|c| match c {
            Change::Add { id, rule } => format!(
                "added    rule \"{id}\": {}{}",
                rule.requirement.describe(layout),
                action_text(rule)
            ),
            Change::Fix {
                rule,
                wanted,
                problems,
                ..
            } => format!(
                "fixed    rule {rule} ({}): {}{}",
                problems.join("; "),
                wanted.requirement.describe(layout),
                action_text(wanted)
            ),
        })
        .collect();
    out.extend(plan.left_alone.iter().map(|l| format!("kept     {l}")));
    out
}

fn action_text(w: &rules::WantedRule) -> String {
    match w.requirement {
        Requirement::AbortIncompleteUploads => {
            format!(" after {} days", w.abort_days.unwrap_or_default())
        }
        Requirement::ExpireTombstones => format!(
            " after {} days (replaced versions after {} day)",
            w.expiration_days.unwrap_or_default(),
            w.noncurrent_days.unwrap_or_default()
        ),
    }
}

/// A line for the broker's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    Warn(String),
    Info(String),
}

/// The start-up check of `aerostream serve`: one warning per relied-on rule
/// missing or wrong (and per hazard), or one info line when the rules cannot
/// be read for lack of permission or cannot be read on this kind of store.
/// `tombstones`: whether the broker moves deleted objects to tombstones
/// (without it, the tombstone rule is not relied on).
pub async fn startup_notices(url: &str, env: &StoreEnv, tombstones: bool) -> Vec<Notice> {
    let fix = format!("run `aerostream bucket check --object-store {url} --apply`");
    let (bucket, layout) = match store(url, env) {
        Ok(Store::S3 { bucket, layout }) => (bucket, layout),
        Ok(Store::Local) => return Vec::new(),
        Ok(Store::Unsupported { kind, .. }) => {
            return vec![Notice::Info(format!(
                "bucket lifecycle rules are not checked on {kind}: {}",
                terraform_pointer(kind)
            ))]
        }
        Err(e) => {
            return vec![Notice::Warn(format!(
                "bucket lifecycle rules not checked: {e}"
            ))]
        }
    };
    let checked = match Bucket::connect(bucket.clone(), layout.clone(), env).await {
        Ok(b) => b.check().await,
        Err(e) => Err(e),
    };
    let report = match checked {
        Ok(c) => c.report,
        Err(e @ LifecycleError::AccessDenied { .. }) => {
            return vec![Notice::Info(format!(
                "bucket lifecycle rules not checked: {e}; `aerostream bucket check` with \
                 credentials that may read them checks them"
            ))]
        }
        Err(e) => {
            return vec![Notice::Warn(format!(
                "bucket lifecycle rules not checked: {e}"
            ))]
        }
    };
    let mut out = Vec::new();
    for f in &report.findings {
        if f.requirement == Requirement::ExpireTombstones && !tombstones {
            continue;
        }
        let what = f.requirement.describe(&layout);
        match &f.status {
            Status::Present { .. } => {}
            Status::Missing => out.push(Notice::Warn(format!(
                "bucket lifecycle rule missing: {what}; {fix}"
            ))),
            Status::Wrong { rule, problems, .. } => out.push(Notice::Warn(format!(
                "bucket lifecycle rule wrong: {what}: rule {rule}: {}; {fix}",
                problems.join("; ")
            ))),
        }
    }
    for h in &report.hazards {
        out.push(Notice::Warn(format!(
            "bucket lifecycle rule {} endangers data: {}",
            h.rule, h.problem
        )));
    }
    if out.is_empty() {
        out.push(Notice::Info(format!(
            "bucket {bucket} has the lifecycle rules AeroStream relies on"
        )));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> StoreEnv {
        StoreEnv::from_pairs([
            ("AWS_ACCESS_KEY_ID", "k"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
            ("AWS_ALLOW_HTTP", "true"),
        ])
    }

    #[test]
    fn urls_name_their_store_and_the_prefix_the_broker_writes_under() {
        assert_eq!(
            store("s3://segs/cluster-1/", &env()).unwrap(),
            Store::S3 {
                bucket: "segs".into(),
                layout: Layout::new("cluster-1")
            }
        );
        assert!(matches!(
            store("gs://b/p", &env()).unwrap(),
            Store::Unsupported {
                kind: "Google Cloud Storage",
                ..
            }
        ));
        assert!(matches!(
            store("az://c", &env()).unwrap(),
            Store::Unsupported {
                kind: "Azure Blob Storage",
                ..
            }
        ));
        assert_eq!(store("memory://", &env()).unwrap(), Store::Local);
        assert!(store("ftp://x", &env()).is_err());
        assert!(store("s3:///p", &env()).is_err());
    }
}
