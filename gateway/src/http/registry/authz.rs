//! Who may do what in the registry, on Kafka's ACL resources (Kafka's ACLs
//! have no subject resource): a subject named as Confluent's default
//! naming strategy names them, `<topic>-key` or `<topic>-value`, is the
//! topic `<topic>`; any other subject is the topic of its own name.
//!
//! | request                                          | needs                      |
//! |--------------------------------------------------|----------------------------|
//! | read a subject, its versions, a lookup, a check  | DESCRIBE on the topic      |
//! | register a version                               | WRITE on the topic         |
//! | delete a version or the subject                  | DELETE on the topic        |
//! | a subject's level or mode                        | ALTER_CONFIGS on the topic |
//! | the global level or mode                         | ALTER_CONFIGS on the cluster |
//! | a schema by id                                   | DESCRIBE on a topic of a subject that has it |
//!
//! Reading the global level or mode and the schema types needs a login
//! only. Lists show only the subjects the caller may describe.

use metastore::acl::{AclOperation, ResourceType};

use super::RegistryError;
use crate::broker::Broker;
use crate::http::Caller;

/// The topic whose ACLs govern `subject`.
pub fn topic_of(subject: &str) -> &str {
    subject
        .strip_suffix("-value")
        .or_else(|| subject.strip_suffix("-key"))
        .filter(|t| !t.is_empty())
        .unwrap_or(subject)
}

pub fn may(b: &Broker, caller: &Caller, operation: AclOperation, subject: &str) -> bool {
    caller.may(b, operation, ResourceType::Topic, topic_of(subject))
}

/// `Ok` when the caller may, else the registry's 40301.
pub fn require(
    b: &Broker,
    caller: &Caller,
    operation: AclOperation,
    subject: &str,
) -> Result<(), RegistryError> {
    if may(b, caller, operation, subject) {
        return Ok(());
    }
    Err(denied(
        caller,
        &format!("{operation} on topic '{}'", topic_of(subject)),
    ))
}

pub fn require_on_cluster(
    b: &Broker,
    caller: &Caller,
    operation: AclOperation,
) -> Result<(), RegistryError> {
    if caller.may_on_cluster(b, operation) {
        return Ok(());
    }
    Err(denied(caller, &format!("{operation} on the cluster")))
}

fn denied(caller: &Caller, needed: &str) -> RegistryError {
    RegistryError::new(
        40301,
        format!(
            "User {} is denied: the request needs {needed} (an ACL) or a superuser",
            caller.principal()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::topic_of;

    #[test]
    fn subjects_map_onto_the_topic_their_naming_strategy_names() {
        assert_eq!(topic_of("orders-value"), "orders");
        assert_eq!(topic_of("orders-key"), "orders");
        assert_eq!(topic_of("com.acme.Order"), "com.acme.Order");
        assert_eq!(topic_of("-value"), "-value");
        assert_eq!(topic_of("a-key-value"), "a-key");
    }
}
