//! One seam for every object-storage backend.
//!
//! [`store_from_url`] turns the `--object-store` URL (env
//! `AEROSTREAM_OBJECT_STORE`) plus the clouds' usual environment variables
//! into an [`ObjectStoreHandle`]: an `Arc<dyn ObjectStore>` and the key
//! prefix under which AeroStream keeps its objects. Every data-path caller
//! (the uploader, the cold cache, retention) goes through this handle and
//! nothing else, so all backends behave the same to them.
//!
//! | URL | backend |
//! |---|---|
//! | `file:///abs/dir` | local folder (the embedded default, under the data dir) |
//! | `memory://` | in-process memory (tests) |
//! | `s3://bucket/prefix` | Amazon S3 and S3-compatible servers (MinIO, moto, ...) |
//! | `gs://bucket/prefix` | Google Cloud Storage |
//! | `az://container/prefix` | Azure Blob Storage (also `azure://`) |
//!
//! Environment variables read (from the [`StoreEnv`] given, normally the
//! process environment):
//!
//! - S3: every `AWS_*` variable that object_store knows, notably
//!   `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT`, `AWS_ENDPOINT_URL_S3`),
//!   `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
//!   `AWS_REGION` / `AWS_DEFAULT_REGION`, `AWS_ALLOW_HTTP`,
//!   `AWS_VIRTUAL_HOSTED_STYLE_REQUEST`, `AWS_WEB_IDENTITY_TOKEN_FILE` +
//!   `AWS_ROLE_ARN`, `AWS_CONTAINER_CREDENTIALS_*`, `AWS_SERVER_SIDE_ENCRYPTION`,
//!   `AWS_SSE_KMS_KEY_ID`. Without keys the EC2/ECS instance credentials are used.
//! - GCS: every `GOOGLE_*` variable object_store knows:
//!   `GOOGLE_SERVICE_ACCOUNT` (path), `GOOGLE_SERVICE_ACCOUNT_KEY` (JSON),
//!   `GOOGLE_APPLICATION_CREDENTIALS`, `GOOGLE_BASE_URL` (a non-Google
//!   endpoint), `GOOGLE_BEARER_TOKEN`, `GOOGLE_ALLOW_HTTP`; plus
//!   `STORAGE_EMULATOR_HOST` (the variable Google's own SDKs use for a local
//!   endpoint): sets the base URL, allows plain HTTP and uses a dummy bearer
//!   token unless one is given.
//! - Azure: every `AZURE_*` variable object_store knows:
//!   `AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY`
//!   (`AZURE_STORAGE_ACCESS_KEY`), `AZURE_STORAGE_CLIENT_ID` /
//!   `_CLIENT_SECRET` / `_TENANT_ID`, `AZURE_STORAGE_SAS_KEY`,
//!   `AZURE_STORAGE_TOKEN`, `AZURE_STORAGE_ENDPOINT` (a non-Microsoft endpoint,
//!   e.g. `http://127.0.0.1:10000/devstoreaccount1` for Azurite),
//!   `AZURE_ALLOW_HTTP`, `AZURE_STORAGE_USE_EMULATOR` (Azurite's well-known
//!   account; its address then comes from `AZURITE_BLOB_STORAGE_URL` in the
//!   process environment, default `http://127.0.0.1:10000`).
//! - All backends: `{AWS,GOOGLE,AZURE}_TIMEOUT`, `_CONNECT_TIMEOUT` and the
//!   other HTTP client keys override the data-path defaults of [`StoreOptions`].

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};

use crate::CacheError;

/// The backend behind a handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Memory,
    Local,
    S3,
    Gcs,
    Azure,
}

impl Backend {
    /// Whether `PutMode::Create` (write only if absent) is honoured by this
    /// backend here. GCS supports it in the cloud, but no local emulator
    /// exercises it, so callers must not depend on it for correctness.
    pub fn supports_conditional_create(self) -> bool {
        !matches!(self, Backend::Gcs)
    }
}

/// An object store plus the prefix under which AeroStream keeps its keys.
#[derive(Clone)]
pub struct ObjectStoreHandle {
    pub store: Arc<dyn ObjectStore>,
    pub prefix: Path,
    pub backend: Backend,
    /// The folder store itself when `store` is a local folder used directly
    /// (not wrapped): uploads may then hard-link sealed files instead of
    /// copying them (see [`crate::upload::link_or_upload_file`]).
    pub local: Option<Arc<LocalFileSystem>>,
}

impl fmt::Debug for ObjectStoreHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectStoreHandle")
            .field("store", &self.store.to_string())
            .field("prefix", &self.prefix.as_ref())
            .field("backend", &self.backend)
            .finish()
    }
}

impl ObjectStoreHandle {
    /// Wraps an existing store (tests wrap stores in fault injectors or counters).
    pub fn new(store: Arc<dyn ObjectStore>, prefix: Path, backend: Backend) -> Self {
        ObjectStoreHandle {
            store,
            prefix,
            backend,
            local: None,
        }
    }

    /// The same prefix and backend over another store, e.g. a wrapper of this one.
    pub fn with_store(&self, store: Arc<dyn ObjectStore>) -> Self {
        ObjectStoreHandle {
            store,
            prefix: self.prefix.clone(),
            backend: self.backend,
            // A wrapper (fault injector, counter) must see every write.
            local: None,
        }
    }

    /// The same handle over a [`crate::metered::MeteredStore`] of this
    /// store, and its counters. Unlike [`Self::with_store`], a local folder
    /// keeps hard-linking sealed files: a link is no request to count, and
    /// a folder bills none.
    pub fn metered(&self) -> (Self, crate::metered::RequestCounters) {
        let store = crate::metered::MeteredStore::new(Arc::clone(&self.store));
        let counters = store.counters();
        let handle = ObjectStoreHandle {
            store: Arc::new(store),
            prefix: self.prefix.clone(),
            backend: self.backend,
            local: self.local.clone(),
        };
        (handle, counters)
    }

    /// A fresh in-memory store, for tests.
    pub fn in_memory() -> Self {
        ObjectStoreHandle::new(Arc::new(InMemory::new()), Path::default(), Backend::Memory)
    }

    /// The embedded default: a folder `objects` under the data directory.
    pub fn local_default(data_dir: &std::path::Path) -> Result<Self, CacheError> {
        local_folder(&data_dir.join("objects"))
    }
}

/// The environment variables a store is configured from.
///
/// Passed explicitly so tests can configure stores without mutating the
/// process environment (which other threads read concurrently).
#[derive(Debug, Clone, Default)]
pub struct StoreEnv {
    vars: BTreeMap<String, String>,
}

impl StoreEnv {
    /// The process environment (only UTF-8 variables).
    pub fn from_process() -> Self {
        StoreEnv {
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        }
    }

    /// An explicit set of variables.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        StoreEnv {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// Adds or replaces one variable.
    pub fn set(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.vars.insert(key.into(), value.into());
        self
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars.get(key).map(String::as_str)
    }

    fn with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (String, &'a str)> + 'a {
        self.vars
            .iter()
            .filter(move |(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.to_ascii_lowercase(), v.as_str()))
    }
}

/// HTTP behaviour of the cloud clients on the data path.
///
/// The defaults favour a data path: fail a hung connection fast, retry
/// transient errors a few times with short exponential backoff (the client
/// adds jitter), and bound the total time so an outage surfaces to the
/// uploader, which has its own longer retry loop.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub connect_timeout: Duration,
    /// Whole-request timeout; must cover one multipart part or one cache block.
    pub request_timeout: Duration,
    pub max_retries: usize,
    pub init_backoff: Duration,
    pub max_backoff: Duration,
    /// Gives up retrying one request after this long.
    pub retry_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(60),
            max_retries: 4,
            init_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
            retry_timeout: Duration::from_secs(30),
        }
    }
}

impl StoreOptions {
    fn client_options(&self) -> ClientOptions {
        ClientOptions::new()
            .with_connect_timeout(self.connect_timeout)
            .with_timeout(self.request_timeout)
            .with_pool_idle_timeout(Duration::from_secs(30))
    }

    fn retry(&self) -> RetryConfig {
        RetryConfig {
            backoff: BackoffConfig {
                init_backoff: self.init_backoff,
                max_backoff: self.max_backoff,
                base: 2.0,
            },
            max_retries: self.max_retries,
            retry_timeout: self.retry_timeout,
        }
    }
}

/// Builds the store named by `url` with default [`StoreOptions`].
pub fn store_from_url(url: &str, env: &StoreEnv) -> Result<ObjectStoreHandle, CacheError> {
    store_from_url_with(url, env, &StoreOptions::default())
}

/// Builds the store named by `url`, configured from `env` and `options`.
pub fn store_from_url_with(
    url: &str,
    env: &StoreEnv,
    options: &StoreOptions,
) -> Result<ObjectStoreHandle, CacheError> {
    let invalid = |reason: &str| CacheError::InvalidUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| invalid("expected SCHEME://..., e.g. s3://bucket/prefix"))?;
    let configure = |source| CacheError::Configure {
        url: url.to_string(),
        source,
    };
    match scheme.to_ascii_lowercase().as_str() {
        "memory" => {
            let prefix = parse_prefix(rest).map_err(|r| invalid(&r))?;
            Ok(ObjectStoreHandle::new(
                Arc::new(InMemory::new()),
                prefix,
                Backend::Memory,
            ))
        }
        "file" => {
            if !rest.starts_with('/') {
                return Err(invalid(
                    "a file URL needs an absolute path: file:///abs/dir",
                ));
            }
            local_folder(std::path::Path::new(rest))
        }
        "s3" | "s3a" => {
            let (bucket, prefix) = split_bucket(rest).map_err(|r| invalid(&r))?;
            let mut builder = AmazonS3Builder::new()
                .with_client_options(options.client_options())
                .with_retry(options.retry());
            for (key, value) in env.with_prefix("AWS_") {
                if let Ok(key) = key.parse::<AmazonS3ConfigKey>() {
                    builder = builder.with_config(key, value);
                }
            }
            let store = builder
                .with_bucket_name(bucket)
                .build()
                .map_err(configure)?;
            Ok(ObjectStoreHandle::new(Arc::new(store), prefix, Backend::S3))
        }
        "gs" | "gcs" => {
            let (bucket, prefix) = split_bucket(rest).map_err(|r| invalid(&r))?;
            let mut builder = GoogleCloudStorageBuilder::new()
                .with_client_options(options.client_options())
                .with_retry(options.retry());
            if let Some(host) = env.get("STORAGE_EMULATOR_HOST") {
                let base = if host.contains("://") {
                    host.to_string()
                } else {
                    format!("http://{host}")
                };
                builder = builder
                    .with_base_url(base.trim_end_matches('/'))
                    .with_config(
                        GoogleConfigKey::Client(object_store::ClientConfigKey::AllowHttp),
                        "true",
                    )
                    .with_bearer_token("emulator");
            }
            for (key, value) in env.with_prefix("GOOGLE_") {
                if let Ok(key) = key.parse::<GoogleConfigKey>() {
                    builder = builder.with_config(key, value);
                }
            }
            let store = builder
                .with_bucket_name(bucket)
                .build()
                .map_err(configure)?;
            Ok(ObjectStoreHandle::new(
                Arc::new(store),
                prefix,
                Backend::Gcs,
            ))
        }
        "az" | "azure" => {
            let (container, prefix) = split_bucket(rest).map_err(|r| invalid(&r))?;
            let mut builder = MicrosoftAzureBuilder::new()
                .with_client_options(options.client_options())
                .with_retry(options.retry());
            for (key, value) in env.with_prefix("AZURE_") {
                if let Ok(key) = key.parse::<AzureConfigKey>() {
                    builder = builder.with_config(key, value);
                }
            }
            let store = builder
                .with_container_name(container)
                .build()
                .map_err(configure)?;
            Ok(ObjectStoreHandle::new(
                Arc::new(store),
                prefix,
                Backend::Azure,
            ))
        }
        other => Err(invalid(&format!(
            "unknown scheme {other:?}; use file, memory, s3, gs or az"
        ))),
    }
}

fn local_folder(dir: &std::path::Path) -> Result<ObjectStoreHandle, CacheError> {
    std::fs::create_dir_all(dir).map_err(|source| CacheError::Directory {
        path: dir.display().to_string(),
        source,
    })?;
    let store = LocalFileSystem::new_with_prefix(dir)
        .map_err(|source| CacheError::Configure {
            url: format!("file://{}", dir.display()),
            source,
        })?
        .with_automatic_cleanup(true);
    let store = Arc::new(store);
    let mut handle = ObjectStoreHandle::new(
        Arc::clone(&store) as Arc<dyn ObjectStore>,
        Path::default(),
        Backend::Local,
    );
    handle.local = Some(store);
    Ok(handle)
}

fn split_bucket(rest: &str) -> Result<(&str, Path), String> {
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err("the bucket (or container) name is missing".to_string());
    }
    Ok((bucket, parse_prefix(prefix)?))
}

fn parse_prefix(prefix: &str) -> Result<Path, String> {
    Path::parse(prefix.trim_matches('/')).map_err(|e| format!("invalid key prefix {prefix:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3_env() -> StoreEnv {
        StoreEnv::from_pairs([
            ("AWS_ACCESS_KEY_ID", "k"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
            ("AWS_ALLOW_HTTP", "true"),
            ("AWS_REGION", "us-east-1"),
        ])
    }

    #[test]
    fn cloud_urls_select_their_backend_and_keep_the_prefix() {
        let h = store_from_url("s3://bucket/a/b/", &s3_env()).unwrap();
        assert_eq!((h.backend, h.prefix.as_ref()), (Backend::S3, "a/b"));

        let gcs_env = StoreEnv::from_pairs([("STORAGE_EMULATOR_HOST", "127.0.0.1:1")]);
        let h = store_from_url("gs://bucket/x", &gcs_env).unwrap();
        assert_eq!((h.backend, h.prefix.as_ref()), (Backend::Gcs, "x"));

        let az_env = StoreEnv::from_pairs([("AZURE_STORAGE_USE_EMULATOR", "true")]);
        let h = store_from_url("az://container", &az_env).unwrap();
        assert_eq!((h.backend, h.prefix.as_ref()), (Backend::Azure, ""));

        let h = store_from_url("memory:///p", &StoreEnv::default()).unwrap();
        assert_eq!((h.backend, h.prefix.as_ref()), (Backend::Memory, "p"));
    }

    #[test]
    fn file_url_creates_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("objects/nested");
        let url = format!("file://{}", target.display());
        let h = store_from_url(&url, &StoreEnv::default()).unwrap();
        assert_eq!(h.backend, Backend::Local);
        assert!(target.is_dir());
    }

    #[test]
    fn malformed_urls_are_rejected_with_a_reason() {
        for url in [
            "bucket/prefix",
            "ftp://x/y",
            "s3:///prefix",
            "file://relative/dir",
            "s3://b/bad\u{0}",
        ] {
            let err = store_from_url(url, &s3_env()).unwrap_err();
            assert!(matches!(err, CacheError::InvalidUrl { .. }), "{url}: {err}");
        }
    }

    #[test]
    fn unknown_environment_variables_are_ignored() {
        let env = s3_env()
            .set("AWS_NOT_A_REAL_SETTING", "1")
            .set("AWS_PROFILE", "x");
        assert!(store_from_url("s3://bucket", &env).is_ok());
    }
}
