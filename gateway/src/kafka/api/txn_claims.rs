//! Which transactions this agent is completing now, so that a request and
//! the coordinator's sweep do not write the same markers twice at once.

use std::collections::HashSet;
use std::sync::Mutex;

/// Transactional ids this agent is completing now, so that a request and
/// the sweep do not write the same markers twice at once.
#[derive(Debug, Default)]
pub struct Completing(Mutex<HashSet<String>>);

pub(crate) struct Claim<'a> {
    set: &'a Completing,
    id: String,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if let Ok(mut s) = self.set.0.lock() {
            s.remove(&self.id);
        }
    }
}

impl Completing {
    pub(crate) fn claim(&self, id: &str) -> Option<Claim<'_>> {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        s.insert(id.to_owned()).then(|| Claim {
            set: self,
            id: id.to_owned(),
        })
    }
}
