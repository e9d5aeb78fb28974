//! S3 (and S3-compatible servers): reading and writing a bucket's lifecycle
//! configuration with the AWS SDK, configured from the same `AWS_*`
//! variables object_store reads for `s3://` URLs (`cache/src/objects.rs`).
//!
//! S3 replaces a lifecycle configuration whole, so [`merge`] carries every
//! rule it does not edit over unchanged, field for field, as the SDK read it.

use std::time::Duration;

use aws_config::timeout::TimeoutConfig;
use aws_config::BehaviorVersion;
use aws_credential_types::provider::error::CredentialsError;
use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, ExpirationStatus,
    LifecycleExpiration, LifecycleRule, LifecycleRuleFilter, NoncurrentVersionExpiration,
    TransitionDefaultMinimumObjectSize,
};
use aws_sdk_s3::Client;
use cache::StoreEnv;

use crate::merge::{Change, Plan};
use crate::rules::{Expiration, Filter, RuleView, WantedRule};
use crate::LifecycleError;

/// An S3 client for lifecycle calls, configured like object_store's.
///
/// - endpoint: `AWS_ENDPOINT_URL_S3`, else `AWS_ENDPOINT_URL`, else
///   `AWS_ENDPOINT` (a plain `http://` one needs `AWS_ALLOW_HTTP=true`, as for
///   the broker);
/// - path-style requests unless `AWS_VIRTUAL_HOSTED_STYLE_REQUEST=true`;
/// - region: `AWS_REGION`, else `AWS_DEFAULT_REGION`, else `us-east-1`;
/// - credentials: `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+
///   `AWS_SESSION_TOKEN`), else the SDK's default chain (profile, web
///   identity, container and instance credentials).
pub async fn client(env: &StoreEnv) -> Result<Client, LifecycleError> {
    let truthy = |k: &str| {
        env.get(k)
            .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
    };
    // an empty variable counts as unset, as a shell's `VAR=` means
    let get = |k: &str| env.get(k).filter(|v| !v.is_empty());
    let endpoint = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"]
        .iter()
        .find_map(|k| get(k))
        .map(str::to_string);
    if let Some(e) = &endpoint {
        if e.to_ascii_lowercase().starts_with("http://") && !truthy("AWS_ALLOW_HTTP") {
            return Err(LifecycleError::Config(format!(
                "the endpoint {e} is plain HTTP: set AWS_ALLOW_HTTP=true (as the broker needs too)"
            )));
        }
    }
    let region = get("AWS_REGION")
        .or_else(|| get("AWS_DEFAULT_REGION"))
        .unwrap_or("us-east-1")
        .to_string();
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(region))
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(5))
                .operation_timeout(Duration::from_secs(30))
                .build(),
        );
    if let (Some(key), Some(secret)) = (get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")) {
        let token = get("AWS_SESSION_TOKEN")
            .or_else(|| get("AWS_TOKEN"))
            .map(str::to_string);
        loader =
            loader.credentials_provider(Credentials::new(key, secret, token, None, "environment"));
    }
    let shared = loader.load().await;
    let mut conf = aws_sdk_s3::config::Builder::from(&shared)
        .force_path_style(!truthy("AWS_VIRTUAL_HOSTED_STYLE_REQUEST"));
    if let Some(e) = endpoint {
        conf = conf.endpoint_url(e);
    }
    Ok(Client::from_conf(conf.build()))
}

/// A bucket's lifecycle configuration as read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Current {
    pub rules: Vec<LifecycleRule>,
    /// Kept as it was when the configuration is written back.
    pub transition_default_minimum_object_size: Option<TransitionDefaultMinimumObjectSize>,
}

/// Reads the bucket's lifecycle configuration (none at all: no rules).
pub async fn read(client: &Client, bucket: &str) -> Result<Current, LifecycleError> {
    match client
        .get_bucket_lifecycle_configuration()
        .bucket(bucket)
        .send()
        .await
    {
        Ok(out) => Ok(Current {
            rules: out.rules.unwrap_or_default(),
            transition_default_minimum_object_size: out.transition_default_minimum_object_size,
        }),
        Err(e) if e.code() == Some("NoSuchLifecycleConfiguration") => Ok(Current::default()),
        Err(e) => Err(classify(e, bucket, "read")),
    }
}

/// Replaces the bucket's lifecycle configuration with `rules`.
pub async fn write(
    client: &Client,
    bucket: &str,
    current: &Current,
    rules: Vec<LifecycleRule>,
) -> Result<(), LifecycleError> {
    let config = BucketLifecycleConfiguration::builder()
        .set_rules(Some(rules))
        .build()
        .map_err(|e| LifecycleError::Config(format!("cannot build the lifecycle rules: {e}")))?;
    client
        .put_bucket_lifecycle_configuration()
        .bucket(bucket)
        .lifecycle_configuration(config)
        .set_transition_default_minimum_object_size(
            current.transition_default_minimum_object_size.clone(),
        )
        .send()
        .await
        .map(|_| ())
        .map_err(|e| classify(e, bucket, "write"))
}

/// Turns an SDK failure into what the user can act on.
fn classify<E>(err: SdkError<E>, bucket: &str, action: &'static str) -> LifecycleError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let detail = DisplayErrorContext(&err).to_string();
    let status = err.raw_response().map(|r| r.status().as_u16());
    match (err.code(), status) {
        (Some("NoSuchBucket"), _) => LifecycleError::NoSuchBucket {
            bucket: bucket.to_string(),
        },
        (Some("AccessDenied" | "AllAccessDisabled"), _) | (None, Some(403)) => {
            LifecycleError::AccessDenied {
                bucket: bucket.to_string(),
                action,
            }
        }
        (
            Some(
                code @ ("InvalidAccessKeyId"
                | "SignatureDoesNotMatch"
                | "ExpiredToken"
                | "InvalidToken"
                | "TokenRefreshRequired"),
            ),
            _,
        ) => LifecycleError::BadCredentials {
            reason: format!("{code}: {}", err.message().unwrap_or("refused")),
        },
        _ => match credentials_failure(&err) {
            Some(detail) => LifecycleError::NoCredentials { detail },
            None => LifecycleError::Request {
                bucket: bucket.to_string(),
                action,
                detail,
            },
        },
    }
}

/// The credential provider's own account of why it found none, if that is
/// what failed.
fn credentials_failure(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(c) = e.downcast_ref::<CredentialsError>() {
            return Some(c.to_string());
        }
        cur = e.source();
    }
    None
}

/// The parts of an SDK rule that [`crate::rules`] judges.
pub fn view(rule: &LifecycleRule) -> RuleView {
    let filter = match rule.filter() {
        Some(f) => {
            if let Some(and) = f.and() {
                Filter::Conditional(and.prefix().unwrap_or_default().to_string())
            } else if f.tag().is_some()
                || f.object_size_greater_than().is_some()
                || f.object_size_less_than().is_some()
            {
                Filter::Conditional(f.prefix().unwrap_or_default().to_string())
            } else {
                Filter::Prefix(f.prefix().unwrap_or_default().to_string())
            }
        }
        // the deprecated rule-level prefix, or none: the whole bucket
        None => Filter::Prefix(legacy_prefix(rule).to_string()),
    };
    let expiration = match rule.expiration() {
        Some(e) if e.days().is_some() => Expiration::Days(e.days().unwrap_or_default()),
        Some(e) if e.date().is_some() => Expiration::Date,
        Some(e) if e.expired_object_delete_marker() == Some(true) => Expiration::DeleteMarkersOnly,
        _ => Expiration::None,
    };
    RuleView {
        id: rule.id().map(str::to_string),
        enabled: *rule.status() == ExpirationStatus::Enabled,
        filter,
        has_abort: rule.abort_incomplete_multipart_upload().is_some(),
        abort_days: rule
            .abort_incomplete_multipart_upload()
            .and_then(|a| a.days_after_initiation()),
        expiration,
        noncurrent_days: rule
            .noncurrent_version_expiration()
            .and_then(|n| n.noncurrent_days()),
    }
}

/// The rule-level `Prefix` of configurations written before `Filter`
/// existed: S3 still returns it for them.
#[expect(
    deprecated,
    reason = "old configurations still carry the rule-level prefix"
)]
fn legacy_prefix(rule: &LifecycleRule) -> &str {
    rule.prefix().unwrap_or_default()
}

/// The bucket's rules with `plan` applied: fixed rules edited, new rules
/// appended, every other rule exactly as it was.
pub fn merge(current: &[LifecycleRule], plan: &Plan) -> Result<Vec<LifecycleRule>, LifecycleError> {
    let mut rules = current.to_vec();
    for change in &plan.changes {
        match change {
            Change::Add { id, rule } => rules.push(new_rule(id, rule)?),
            Change::Fix { index, wanted, .. } => {
                let Some(old) = rules.get(*index) else {
                    return Err(LifecycleError::Config(format!(
                        "rule #{} is not in the configuration",
                        index + 1
                    )));
                };
                rules[*index] = fixed(old, wanted)?;
            }
        }
    }
    Ok(rules)
}

fn new_rule(id: &str, w: &WantedRule) -> Result<LifecycleRule, LifecycleError> {
    let mut b = LifecycleRule::builder()
        .id(id)
        .status(ExpirationStatus::Enabled)
        .filter(
            LifecycleRuleFilter::builder()
                .prefix(w.prefix.clone())
                .build(),
        );
    if let Some(days) = w.abort_days {
        b = b.abort_incomplete_multipart_upload(
            AbortIncompleteMultipartUpload::builder()
                .days_after_initiation(days)
                .build(),
        );
    }
    if let Some(days) = w.expiration_days {
        b = b.expiration(LifecycleExpiration::builder().days(days).build());
    }
    if let Some(days) = w.noncurrent_days {
        b = b.noncurrent_version_expiration(
            NoncurrentVersionExpiration::builder()
                .noncurrent_days(days)
                .build(),
        );
    }
    b.build()
        .map_err(|e| LifecycleError::Config(format!("cannot build rule {id}: {e}")))
}

/// AeroStream's own rule, enabled and with the missing action set; its id,
/// filter and other actions (transitions, noncurrent expiry) stay.
fn fixed(old: &LifecycleRule, w: &WantedRule) -> Result<LifecycleRule, LifecycleError> {
    let mut rule = old.clone();
    rule.status = ExpirationStatus::Enabled;
    if let Some(days) = w.abort_days {
        if rule
            .abort_incomplete_multipart_upload()
            .and_then(|a| a.days_after_initiation())
            .is_none()
        {
            rule.abort_incomplete_multipart_upload = Some(
                AbortIncompleteMultipartUpload::builder()
                    .days_after_initiation(days)
                    .build(),
            );
        }
    }
    if let Some(days) = w.expiration_days {
        if rule.expiration().and_then(|e| e.days()).is_none() {
            // Days excludes Date and the delete-marker flag in one Expiration
            rule.expiration = Some(LifecycleExpiration::builder().days(days).build());
        }
    }
    if rule.noncurrent_version_expiration().is_none() {
        if let Some(days) = w.noncurrent_days {
            rule.noncurrent_version_expiration = Some(
                NoncurrentVersionExpiration::builder()
                    .noncurrent_days(days)
                    .build(),
            );
        }
    }
    Ok(rule)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::plan;
    use crate::rules::{check, Layout};
    use aws_sdk_s3::types::{StorageClass, Tag, Transition, TransitionStorageClass};

    fn user_rule() -> LifecycleRule {
        LifecycleRule::builder()
            .id("archive-reports")
            .status(ExpirationStatus::Enabled)
            .filter(
                LifecycleRuleFilter::builder()
                    .tag(Tag::builder().key("kind").value("report").build().unwrap())
                    .build(),
            )
            .transitions(
                Transition::builder()
                    .days(30)
                    .storage_class(TransitionStorageClass::from(StorageClass::Glacier.as_str()))
                    .build(),
            )
            .build()
            .unwrap()
    }

    #[test]
    fn merge_keeps_other_rules_field_for_field_and_makes_the_check_pass() {
        let layout = Layout::new("cluster-1");
        let current = vec![user_rule()];
        let views: Vec<_> = current.iter().map(view).collect();
        assert_eq!(views[0].filter, Filter::Conditional(String::new()));
        let p = plan(&views, &layout, &check(&views, &layout));
        let merged = merge(&current, &p).unwrap();
        assert_eq!(merged[0], user_rule());
        assert_eq!(merged.len(), 3);
        let views: Vec<_> = merged.iter().map(view).collect();
        assert!(check(&views, &layout).all_good(), "{views:?}");
    }

    #[test]
    fn a_fix_keeps_the_rules_id_filter_and_other_actions() {
        let layout = Layout::new("c");
        let ours = LifecycleRule::builder()
            .id("aerostream-expire-tombstones")
            .status(ExpirationStatus::Disabled)
            .filter(
                LifecycleRuleFilter::builder()
                    .prefix("c/tombstones/")
                    .build(),
            )
            .noncurrent_version_expiration(
                NoncurrentVersionExpiration::builder()
                    .noncurrent_days(3)
                    .build(),
            )
            .build()
            .unwrap();
        let current = vec![ours];
        let views: Vec<_> = current.iter().map(view).collect();
        let p = plan(&views, &layout, &check(&views, &layout));
        let merged = merge(&current, &p).unwrap();
        let fixed = merged
            .iter()
            .find(|r| r.id() == Some("aerostream-expire-tombstones"))
            .unwrap();
        assert_eq!(fixed.status, ExpirationStatus::Enabled);
        assert_eq!(fixed.expiration().and_then(|e| e.days()), Some(7));
        assert_eq!(
            fixed
                .noncurrent_version_expiration()
                .and_then(|n| n.noncurrent_days()),
            Some(3)
        );
        assert_eq!(
            fixed.filter().and_then(|f| f.prefix()),
            Some("c/tombstones/")
        );
    }
}
