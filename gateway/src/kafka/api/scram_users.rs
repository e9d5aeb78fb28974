//! DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554):
//! the SASL/SCRAM users kept in the metastore, managed with Kafka's own
//! admin tools. Clients send the salted password (never the password); the
//! metastore keeps the salt, the iterations and the keys derived from it.

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::ResponseError;
use metastore::{ScramMechanism, Security, SCRAM_MAX_ITERATIONS, SCRAM_MIN_ITERATIONS};

use super::{msg, s};
use crate::broker::Broker;
use security::scram;

pub fn describe(
    b: &Broker,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let all: BTreeMap<String, Vec<(ScramMechanism, u32)>> =
        b.node.catalog.scram_users().into_iter().collect();
    let info = |m: &[(ScramMechanism, u32)]| -> Vec<CredentialInfo> {
        m.iter()
            .map(|(mech, i)| {
                CredentialInfo::default()
                    .with_mechanism(mech.kafka_type())
                    .with_iterations(i32::try_from(*i).unwrap_or(i32::MAX))
            })
            .collect()
    };
    let results = match req.users {
        None => all
            .iter()
            .map(|(u, m)| {
                DescribeUserScramCredentialsResult::default()
                    .with_user(s(u.clone()))
                    .with_credential_infos(info(m))
            })
            .collect(),
        Some(users) => {
            let mut seen = HashSet::new();
            let dup: HashSet<String> = users
                .iter()
                .map(|u| u.name.to_string())
                .filter(|u| !seen.insert(u.clone()))
                .collect();
            let mut done = HashSet::new();
            users
                .iter()
                .map(|u| u.name.to_string())
                .filter(|u| done.insert(u.clone()))
                .map(|u| {
                    let r = DescribeUserScramCredentialsResult::default().with_user(s(u.clone()));
                    if dup.contains(&u) {
                        return r
                            .with_error_code(ResponseError::DuplicateResource.code())
                            .with_error_message(msg(&format!("user {u} is named twice")));
                    }
                    match all.get(&u) {
                        Some(m) => r.with_credential_infos(info(m)),
                        None => r
                            .with_error_code(ResponseError::ResourceNotFound.code())
                            .with_error_message(msg(&format!(
                                "Attempt to describe a user credential that does not exist: {u}"
                            ))),
                    }
                })
                .collect()
        }
    };
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

fn result(user: &str, e: Option<(ResponseError, String)>) -> AlterUserScramCredentialsResult {
    let r = AlterUserScramCredentialsResult::default().with_user(s(user.to_string()));
    match e {
        None => r,
        Some((code, message)) => r
            .with_error_code(code.code())
            .with_error_message(msg(&message)),
    }
}

/// Every alteration's user answered with `error` (the client may not
/// alter credentials).
pub fn refuse(
    req: AlterUserScramCredentialsRequest,
    error: ResponseError,
) -> AlterUserScramCredentialsResponse {
    let mut users: Vec<String> = req
        .deletions
        .iter()
        .map(|d| d.name.to_string())
        .chain(req.upsertions.iter().map(|u| u.name.to_string()))
        .collect();
    users.sort();
    users.dedup();
    let results = users
        .iter()
        .map(|u| {
            result(
                u,
                Some((
                    error,
                    format!("ALTER on the cluster is needed to change {u}"),
                )),
            )
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}

pub async fn alter(
    b: &Broker,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    // a user named in more than one alteration gets DUPLICATE_RESOURCE and
    // none of its alterations applies, as in Kafka
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for n in req
        .deletions
        .iter()
        .map(|d| d.name.to_string())
        .chain(req.upsertions.iter().map(|u| u.name.to_string()))
    {
        *count.entry(n).or_default() += 1;
    }
    let mut results = Vec::new();
    let mut answered = HashSet::new();
    let duplicate = |u: &str| count.get(u).copied().unwrap_or(0) > 1;
    for d in &req.deletions {
        let user = d.name.to_string();
        if !answered.insert(user.clone()) {
            continue;
        }
        let outcome = if duplicate(&user) {
            Some((
                ResponseError::DuplicateResource,
                format!("user {user} is altered twice"),
            ))
        } else if let Some(m) = ScramMechanism::from_kafka_type(d.mechanism) {
            match b.node.catalog.delete_scram_credential(&user, m).await {
                Ok(true) => None,
                Ok(false) => Some((
                    ResponseError::ResourceNotFound,
                    format!(
                        "Attempt to delete a user credential that does not exist: {user} {}",
                        m.name()
                    ),
                )),
                Err(e) => Some((crate::codes::meta_error(&e), e.to_string())),
            }
        } else {
            Some((
                ResponseError::UnsupportedSaslMechanism,
                format!("unknown SCRAM mechanism {}", d.mechanism),
            ))
        };
        results.push(result(&user, outcome));
    }
    for u in &req.upsertions {
        let user = u.name.to_string();
        if !answered.insert(user.clone()) {
            continue;
        }
        let iterations = u32::try_from(u.iterations).unwrap_or(0);
        let outcome = if duplicate(&user) {
            Some((
                ResponseError::DuplicateResource,
                format!("user {user} is altered twice"),
            ))
        } else if user.is_empty() {
            Some((
                ResponseError::UnacceptableCredential,
                "the user name is empty".to_string(),
            ))
        } else if !(SCRAM_MIN_ITERATIONS..=SCRAM_MAX_ITERATIONS).contains(&iterations) {
            Some((
                ResponseError::UnacceptableCredential,
                format!(
                    "iterations must be between {SCRAM_MIN_ITERATIONS} and {SCRAM_MAX_ITERATIONS}"
                ),
            ))
        } else if let Some(m) = ScramMechanism::from_kafka_type(u.mechanism) {
            if u.salt.is_empty() || u.salted_password.len() != m.hash_len() {
                Some((
                    ResponseError::UnacceptableCredential,
                    format!(
                        "a {} upsertion needs a salt and a {}-byte salted password",
                        m.name(),
                        m.hash_len()
                    ),
                ))
            } else {
                let c = scram::credential_from_salted(
                    m,
                    u.salt.to_vec(),
                    &u.salted_password,
                    iterations,
                );
                match b.node.catalog.upsert_scram_credential(&user, m, c).await {
                    Ok(()) => {
                        tracing::info!(user, mechanism = m.name(), "SCRAM credential set");
                        None
                    }
                    Err(e) => Some((crate::codes::meta_error(&e), e.to_string())),
                }
            }
        } else {
            Some((
                ResponseError::UnsupportedSaslMechanism,
                format!("unknown SCRAM mechanism {}", u.mechanism),
            ))
        };
        results.push(result(&user, outcome));
    }
    AlterUserScramCredentialsResponse::default().with_results(results)
}
