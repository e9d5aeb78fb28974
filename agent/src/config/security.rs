//! What the listeners ask of clients: TLS certificate files, SASL
//! mechanisms, the admin user, OAUTHBEARER's token checks and ACL
//! authorization. Settings that only work together are refused apart,
//! with the one missing named.

use std::path::PathBuf;

use anyhow::Context;

use super::args::ServeArgs;
use super::file::FileSettings;

/// `--native-tls-cert` and `--native-tls-key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeTlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Both files or neither.
pub(super) fn resolve_native_tls(
    args: &ServeArgs,
    file: &FileSettings,
) -> anyhow::Result<Option<NativeTlsFiles>> {
    let cert = args
        .native_tls_cert
        .clone()
        .or_else(|| file.native_tls_cert.clone());
    let key = args
        .native_tls_key
        .clone()
        .or_else(|| file.native_tls_key.clone());
    match (cert, key) {
        (Some(cert), Some(key)) => Ok(Some(NativeTlsFiles { cert, key })),
        (None, None) => Ok(None),
        (Some(_), None) => anyhow::bail!(
            "--native-tls-cert is set but --native-tls-key is not: the QUIC endpoint needs the \
             certificate's private key too (or leave both out for a certificate from the agent's own CA)"
        ),
        (None, Some(_)) => anyhow::bail!(
            "--native-tls-key is set but --native-tls-cert is not: the QUIC endpoint needs the \
             certificate too (or leave both out for a certificate from the agent's own CA)"
        ),
    }
}

/// `--kafka-tls-cert`, `--kafka-tls-key` and `--kafka-tls-client-ca`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaTlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
}

/// Certificate and key both or neither; a client CA only with them.
pub(super) fn resolve_kafka_tls(
    args: &ServeArgs,
    file: &FileSettings,
) -> anyhow::Result<Option<KafkaTlsFiles>> {
    let cert = args
        .kafka_tls_cert
        .clone()
        .or_else(|| file.kafka_tls_cert.clone());
    let key = args
        .kafka_tls_key
        .clone()
        .or_else(|| file.kafka_tls_key.clone());
    let client_ca = args
        .kafka_tls_client_ca
        .clone()
        .or_else(|| file.kafka_tls_client_ca.clone());
    match (cert, key) {
        (Some(cert), Some(key)) => Ok(Some(KafkaTlsFiles {
            cert,
            key,
            client_ca,
        })),
        (None, None) if client_ca.is_some() => anyhow::bail!(
            "--kafka-tls-client-ca is set but --kafka-tls-cert is not: clients present their \
             certificates over TLS, so the listener needs its own certificate and key too"
        ),
        (None, None) => Ok(None),
        (Some(_), None) => anyhow::bail!(
            "--kafka-tls-cert is set but --kafka-tls-key is not: the Kafka listener needs the \
             certificate's private key too"
        ),
        (None, Some(_)) => anyhow::bail!(
            "--kafka-tls-key is set but --kafka-tls-cert is not: the Kafka listener needs the \
             certificate too"
        ),
    }
}

/// What the Kafka listener asks of clients beyond TLS.
pub(super) struct Auth {
    pub(super) sasl_mechanisms: Vec<gateway::sasl::Mechanism>,
    pub(super) admin_user: Option<(String, String)>,
    pub(super) oauthbearer: Option<security::oauthbearer::OAuthConfig>,
    pub(super) authz: security::authz::AuthzConfig,
}

/// SASL mechanisms, the admin user, OAUTHBEARER's token checks and ACL
/// authorization, which is on whenever clients authenticate (SASL, or
/// certificates checked against `kafka_tls`'s client CA).
pub(super) fn resolve_auth(
    args: &ServeArgs,
    file: &FileSettings,
    kafka_tls: Option<&KafkaTlsFiles>,
) -> anyhow::Result<Auth> {
    let mut sasl_mechanisms = Vec::new();
    for name in args
        .sasl_mechanisms
        .clone()
        .or_else(|| file.sasl_mechanisms.clone())
        .unwrap_or_default()
    {
        let name = name.trim();
        if name.is_empty() {
            continue;
        }
        let m = gateway::sasl::Mechanism::from_name(name).with_context(|| {
            format!("unknown SASL mechanism {name}: use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
        })?;
        if !sasl_mechanisms.contains(&m) {
            sasl_mechanisms.push(m);
        }
    }
    let admin_user = match args.admin_user.clone().or_else(|| file.admin_user.clone()) {
        None => None,
        Some(pair) => {
            let (name, password) = pair
                .split_once(':')
                .filter(|(n, p)| !n.is_empty() && !p.is_empty())
                .context("--admin-user is NAME:PASSWORD, both non-empty")?;
            Some((name.to_string(), password.to_string()))
        }
    };
    let jwks = args
        .sasl_oauthbearer_jwks
        .clone()
        .or_else(|| file.sasl_oauthbearer_jwks.clone());
    let oauthbearer = match (sasl_mechanisms.contains(&gateway::sasl::Mechanism::OAuthBearer), jwks) {
        (true, Some(jwks)) => Some(security::oauthbearer::OAuthConfig {
            jwks,
            issuer: args
                .sasl_oauthbearer_issuer
                .clone()
                .or_else(|| file.sasl_oauthbearer_issuer.clone()),
            audience: args
                .sasl_oauthbearer_audience
                .clone()
                .or_else(|| file.sasl_oauthbearer_audience.clone()),
            principal_claim: args
                .sasl_oauthbearer_sub_claim
                .clone()
                .or_else(|| file.sasl_oauthbearer_sub_claim.clone())
                .unwrap_or_else(|| "sub".into()),
        }),
        (true, None) => anyhow::bail!(
            "OAUTHBEARER needs --sasl-oauthbearer-jwks: the issuer's public keys its tokens are checked with"
        ),
        (false, Some(_)) => anyhow::bail!(
            "--sasl-oauthbearer-jwks is set but OAUTHBEARER is not in --sasl-mechanisms"
        ),
        (false, None) => None,
    };
    let mut superusers = Vec::new();
    for p in args
        .superusers
        .clone()
        .or_else(|| file.superusers.clone())
        .unwrap_or_default()
    {
        let p = p.trim();
        if p.is_empty() {
            continue;
        }
        if !p
            .split_once(':')
            .is_some_and(|(k, n)| !k.is_empty() && !n.is_empty())
        {
            anyhow::bail!("--superusers takes principals as Type:name (User:alice), not {p}");
        }
        superusers.push(p.to_string());
    }
    if let Some((name, _)) = &admin_user {
        superusers.push(format!("User:{name}"));
    }
    let authz = security::authz::AuthzConfig {
        enabled: !sasl_mechanisms.is_empty() || kafka_tls.is_some_and(|t| t.client_ca.is_some()),
        superusers,
        allow_if_no_acl: args
            .allow_everyone_if_no_acl_found
            .or(file.allow_everyone_if_no_acl_found)
            .unwrap_or(false),
    };
    Ok(Auth {
        sasl_mechanisms,
        admin_user,
        oauthbearer,
        authz,
    })
}

/// What to warn about at start when OAUTHBEARER leaves a token's
/// audience or issuer unchecked: any token the key set verifies then logs
/// in, including one the identity provider issued for another service (and
/// its `sub` is a principal like any SCRAM user's, `admin` included).
pub fn oauthbearer_warning(o: &security::oauthbearer::OAuthConfig) -> Option<String> {
    let unchecked: Vec<&str> = [
        (
            o.audience.is_none(),
            "audience (--sasl-oauthbearer-audience)",
        ),
        (o.issuer.is_none(), "issuer (--sasl-oauthbearer-issuer)"),
    ]
    .into_iter()
    .filter_map(|(missing, what)| missing.then_some(what))
    .collect();
    if unchecked.is_empty() {
        return None;
    }
    Some(format!(
        "OAUTHBEARER does not check the token's {}: any token the key set verifies is accepted, including tokens the identity provider issued for other services",
        unchecked.join(" or ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use std::io::Write;

    fn error_of(args: &ServeArgs) -> String {
        format!("{:#}", Settings::resolve(args).expect_err("refused"))
    }

    #[test]
    fn kafka_tls_files_come_both_or_neither_and_the_client_ca_only_with_them() {
        assert_eq!(
            Settings::resolve(&ServeArgs::default())
                .expect("valid")
                .kafka_tls,
            None
        );
        let s = Settings::resolve(&ServeArgs {
            kafka_tls_cert: Some("/c.pem".into()),
            kafka_tls_key: Some("/k.pem".into()),
            kafka_tls_client_ca: Some("/ca.pem".into()),
            ..Default::default()
        })
        .expect("valid");
        assert_eq!(
            s.kafka_tls,
            Some(KafkaTlsFiles {
                cert: "/c.pem".into(),
                key: "/k.pem".into(),
                client_ca: Some("/ca.pem".into()),
            })
        );
        let err = error_of(&ServeArgs {
            kafka_tls_cert: Some("/c.pem".into()),
            ..Default::default()
        });
        assert!(err.contains("--kafka-tls-key is not"), "{err}");
        let err = error_of(&ServeArgs {
            kafka_tls_key: Some("/k.pem".into()),
            ..Default::default()
        });
        assert!(err.contains("--kafka-tls-cert is not"), "{err}");
        let err = error_of(&ServeArgs {
            kafka_tls_client_ca: Some("/ca.pem".into()),
            ..Default::default()
        });
        assert!(err.contains("--kafka-tls-cert is not"), "{err}");

        let mut f = tempfile::NamedTempFile::new().expect("tmp");
        writeln!(
            f,
            "kafka_tls_cert = \"/f/cert.pem\"\nkafka_tls_key = \"/f/key.pem\""
        )
        .expect("write");
        let s = Settings::resolve(&ServeArgs {
            config: Some(f.path().to_path_buf()),
            ..Default::default()
        })
        .expect("valid");
        let files = s.kafka_tls.expect("from the file");
        assert_eq!(
            (files.cert, files.client_ca),
            (PathBuf::from("/f/cert.pem"), None)
        );
    }

    #[test]
    fn native_tls_files_come_both_or_neither() {
        assert_eq!(
            Settings::resolve(&ServeArgs::default())
                .expect("valid")
                .native_tls,
            None
        );
        let s = Settings::resolve(&ServeArgs {
            native_tls_cert: Some("/etc/a/cert.pem".into()),
            native_tls_key: Some("/etc/a/key.pem".into()),
            ..Default::default()
        })
        .expect("valid");
        assert_eq!(
            s.native_tls,
            Some(NativeTlsFiles {
                cert: "/etc/a/cert.pem".into(),
                key: "/etc/a/key.pem".into()
            })
        );
        let err = error_of(&ServeArgs {
            native_tls_cert: Some("/c.pem".into()),
            ..Default::default()
        });
        assert!(err.contains("--native-tls-key is not"), "{err}");
        let err = error_of(&ServeArgs {
            native_tls_key: Some("/k.pem".into()),
            ..Default::default()
        });
        assert!(err.contains("--native-tls-cert is not"), "{err}");

        let mut f = tempfile::NamedTempFile::new().expect("tmp");
        writeln!(
            f,
            "native_tls_cert = \"/f/cert.pem\"\nnative_tls_key = \"/f/key.pem\""
        )
        .expect("write");
        let s = Settings::resolve(&ServeArgs {
            config: Some(f.path().to_path_buf()),
            native_tls_key: Some("/flag/key.pem".into()),
            ..Default::default()
        })
        .expect("valid");
        let files = s.native_tls.expect("from the file");
        assert_eq!(files.cert, PathBuf::from("/f/cert.pem"));
        assert_eq!(files.key, PathBuf::from("/flag/key.pem"), "the flag wins");
    }

    #[test]
    fn oauthbearer_without_audience_or_issuer_is_warned_about_at_start() {
        let config =
            |issuer: Option<&str>, audience: Option<&str>| security::oauthbearer::OAuthConfig {
                jwks: "/jwks.json".into(),
                issuer: issuer.map(String::from),
                audience: audience.map(String::from),
                principal_claim: "sub".into(),
            };
        let both = oauthbearer_warning(&config(None, None)).expect("a warning");
        assert!(both.contains("--sasl-oauthbearer-audience"), "{both}");
        assert!(both.contains("--sasl-oauthbearer-issuer"), "{both}");
        assert!(both.contains("other services"), "{both}");
        let audience = oauthbearer_warning(&config(Some("https://idp/"), None)).expect("a warning");
        assert!(
            audience.contains("audience") && !audience.contains("issuer ("),
            "{audience}"
        );
        assert_eq!(
            oauthbearer_warning(&config(Some("https://idp/"), Some("kafka"))),
            None
        );
    }
}
