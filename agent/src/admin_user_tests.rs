#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use metastore::{Metastore, MetastoreConfig, ScramMechanism, Security};

use super::{ensure, Outcome};

async fn metastore(dir: &std::path::Path) -> Metastore {
    let meta = Metastore::start(MetastoreConfig::embedded(dir.join("meta")))
        .await
        .unwrap();
    meta.wait_ready(Duration::from_secs(30)).await.unwrap();
    meta
}

/// A PLAIN or HTTP Basic login's password check, from a fresh client.
fn check_password(
    meta: &Metastore,
    user: &str,
    password: &str,
) -> Result<(), security::LoginError> {
    security::Passwords::default().check(
        meta,
        user,
        password,
        std::net::IpAddr::from([127, 0, 0, 1]),
        std::time::Instant::now(),
    )
}

fn logs_in(meta: &Metastore, user: &str, password: &str) -> bool {
    check_password(meta, user, password).is_ok()
        && ScramMechanism::ALL.iter().all(|m| {
            let c = meta.scram_credential(user, *m).expect("a credential");
            security::scram::password_matches(*m, &c, password)
        })
}

/// Before SASL is turned on anyone may set the admin's credential (here
/// `evil`, for both mechanisms, as Kafka's AlterUserScramCredentials
/// would). Started with `--admin-user admin:good`, the agent replaces it:
/// `evil` no longer logs in, `good` does.
#[tokio::test]
async fn a_credential_someone_else_set_does_not_survive_the_admin_user_flag() {
    let dir = tempfile::tempdir().unwrap();
    let meta = metastore(dir.path()).await;
    for m in ScramMechanism::ALL {
        let c = security::scram::credential(m, "evil", 4096).unwrap();
        meta.upsert_scram_credential("admin", m, c).await.unwrap();
    }
    assert!(logs_in(&meta, "admin", "evil"));

    let done = ensure(&meta, "admin", "good").await.unwrap();
    assert!(
        check_password(&meta, "admin", "evil").is_err(),
        "PLAIN and HTTP Basic refuse evil"
    );
    assert!(!logs_in(&meta, "admin", "evil"), "so does SCRAM");
    assert!(logs_in(&meta, "admin", "good"));
    assert!(
        done.iter().all(|(_, o)| *o == Outcome::Replaced),
        "{done:?}"
    );
    meta.shutdown().await.unwrap();
}

/// A credential that matches is kept as it is (same salt): restarting with
/// the flag writes nothing. A missing mechanism is created.
#[tokio::test]
async fn a_matching_credential_is_kept_and_a_missing_one_created() {
    let dir = tempfile::tempdir().unwrap();
    let meta = metastore(dir.path()).await;
    let first = ensure(&meta, "admin", "good").await.unwrap();
    assert!(first.iter().all(|(_, o)| *o == Outcome::Created));
    let before = meta.scram_credential("admin", ScramMechanism::Sha512);
    let again = ensure(&meta, "admin", "good").await.unwrap();
    assert!(again.iter().all(|(_, o)| *o == Outcome::Kept), "{again:?}");
    assert_eq!(
        meta.scram_credential("admin", ScramMechanism::Sha512),
        before
    );

    meta.delete_scram_credential("admin", ScramMechanism::Sha256)
        .await
        .unwrap();
    let third = ensure(&meta, "admin", "good").await.unwrap();
    assert!(third.contains(&(ScramMechanism::Sha256, Outcome::Created)));
    assert!(third.contains(&(ScramMechanism::Sha512, Outcome::Kept)));
    assert!(logs_in(&meta, "admin", "good"));
    meta.shutdown().await.unwrap();
}
