//! Password checks by a user's SCRAM credential: SASL/PLAIN, the HTTP
//! port's Basic logins and the native protocol's PLAIN logins check
//! passwords this way, so one password serves every mechanism.

use metastore::{Metastore, ScramMechanism, Security};

use crate::error::LoginError;
use crate::scram;

/// Whether `password` is `user`'s, by the user's SCRAM credential (SHA-512
/// first): PLAIN and the HTTP listener's Basic authentication check
/// passwords so.
pub fn check_password(catalog: &Metastore, user: &str, password: &str) -> Result<(), LoginError> {
    for m in [ScramMechanism::Sha512, ScramMechanism::Sha256] {
        if let Some(c) = catalog.scram_credential(user, m) {
            return if scram::password_matches(m, &c, password) {
                Ok(())
            } else {
                Err(LoginError::WrongPassword(user.to_string()))
            };
        }
    }
    Err(LoginError::UnknownUser(user.to_string()))
}
