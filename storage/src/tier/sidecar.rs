//! The small optional objects uploaded beside a segment (its producer
//! snapshot, its aborted-transaction index): one PUT and one GET each,
//! bounded by a deadline, a missing object being no error.

use std::time::Duration;

use bytes::Bytes;
use cache::object_store::path::Path;
use cache::{CacheError, ObjectStoreExt, ObjectStoreHandle};

use super::error::TierError;
use super::manifest::ObjectPlace;

/// Stores `bytes` at `key` within `deadline`; the bytes sent.
pub(super) async fn put(
    store: &ObjectStoreHandle,
    key: &Path,
    bytes: Vec<u8>,
    deadline: Duration,
) -> Result<u64, TierError> {
    let size = bytes.len() as u64;
    match tokio::time::timeout(deadline, store.store.put(key, Bytes::from(bytes).into())).await {
        Ok(Ok(_)) => Ok(size),
        Ok(Err(source)) => Err(CacheError::Store {
            key: key.to_string(),
            source: source.into(),
        }
        .into()),
        Err(_) => Err(TierError::Timeout {
            what: format!("upload of {key}"),
            seconds: deadline.as_secs(),
        }),
    }
}

/// The bytes of one of an entry's optional objects (a whole object, or its
/// range of a packed one), `None` when there is none, within `deadline`.
pub(super) async fn get_placed(
    store: &ObjectStoreHandle,
    place: &ObjectPlace,
    deadline: Duration,
) -> Result<Option<Bytes>, TierError> {
    let len = match place.len {
        None => return get(store, &place.key, deadline).await,
        Some(0) => return Ok(None),
        Some(len) => len,
    };
    let path = Path::parse(&place.key).map_err(|err| TierError::CorruptObject {
        key: place.key.clone(),
        position: 0,
        reason: format!("the manifest holds an unusable key: {err}"),
    })?;
    let range = place.start..place.start + len;
    match tokio::time::timeout(deadline, store.store.get_range(&path, range)).await {
        Ok(Ok(bytes)) => Ok(Some(bytes)),
        // the manifest names this range: its object must be there
        Ok(Err(source)) => Err(CacheError::Store {
            key: place.key.clone(),
            source: source.into(),
        }
        .into()),
        Err(_) => Err(TierError::Timeout {
            what: format!("read of {}", place.key),
            seconds: deadline.as_secs(),
        }),
    }
}

/// The object at `key` (a key from the manifest's family), `None` when it
/// is not there, within `deadline`.
pub(super) async fn get(
    store: &ObjectStoreHandle,
    key: &str,
    deadline: Duration,
) -> Result<Option<Bytes>, TierError> {
    let path = Path::parse(key).map_err(|err| TierError::CorruptObject {
        key: key.to_owned(),
        position: 0,
        reason: format!("the manifest holds an unusable key: {err}"),
    })?;
    let get = async {
        let got = store.store.get(&path).await?;
        got.bytes().await
    };
    match tokio::time::timeout(deadline, get).await {
        Ok(Ok(bytes)) => Ok(Some(bytes)),
        Ok(Err(cache::object_store::Error::NotFound { .. })) => Ok(None),
        Ok(Err(source)) => Err(CacheError::Store {
            key: key.to_owned(),
            source: source.into(),
        }
        .into()),
        Err(_) => Err(TierError::Timeout {
            what: format!("read of {key}"),
            seconds: deadline.as_secs(),
        }),
    }
}
