use super::*;
use metastore::acl::PatternType;

fn on(config: &AuthzConfig) -> AuthzConfig {
    AuthzConfig {
        enabled: true,
        ..config.clone()
    }
}

fn bind(
    principal: &str,
    name: &str,
    pattern: PatternType,
    op: AclOperation,
    permission: AclPermission,
) -> AclBinding {
    AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: name.into(),
        pattern,
        principal: principal.into(),
        host: "*".into(),
        operation: op,
        permission,
    }
}

const ALICE: Requester<'static> = Requester {
    principal: "User:alice",
    host: "10.0.0.1",
};

fn may(
    acls: &[AclBinding],
    config: &AuthzConfig,
    who: Requester<'_>,
    op: AclOperation,
    topic: &str,
) -> bool {
    decide(config, acls, who, op, ResourceType::Topic, topic)
}

#[test]
fn with_authorization_off_everything_is_allowed() {
    let off = AuthzConfig::default();
    assert!(may(&[], &off, ALICE, AclOperation::Write, "orders"));
}

#[test]
fn no_acl_means_deny_unless_allow_everyone_is_set() {
    let c = on(&AuthzConfig::default());
    assert!(!may(&[], &c, ALICE, AclOperation::Read, "orders"));
    let open = AuthzConfig {
        allow_if_no_acl: true,
        ..c.clone()
    };
    assert!(may(&[], &open, ALICE, AclOperation::Read, "orders"));
    // a binding for someone else on the resource closes it to the rest
    let bob = [bind(
        "User:bob",
        "orders",
        PatternType::Literal,
        AclOperation::Read,
        AclPermission::Allow,
    )];
    assert!(!may(&bob, &open, ALICE, AclOperation::Read, "orders"));
}

#[test]
fn an_allow_grants_its_operation_and_what_it_implies_on_what_its_pattern_covers() {
    let c = on(&AuthzConfig::default());
    let acls = [
        bind(
            "User:alice",
            "orders",
            PatternType::Prefixed,
            AclOperation::Read,
            AclPermission::Allow,
        ),
        bind(
            "User:*",
            "public",
            PatternType::Literal,
            AclOperation::Write,
            AclPermission::Allow,
        ),
    ];
    assert!(may(&acls, &c, ALICE, AclOperation::Read, "orders-eu"));
    assert!(may(&acls, &c, ALICE, AclOperation::Describe, "orders-eu"));
    assert!(!may(&acls, &c, ALICE, AclOperation::Write, "orders-eu"));
    assert!(!may(&acls, &c, ALICE, AclOperation::Read, "order"));
    assert!(may(&acls, &c, ALICE, AclOperation::Write, "public"));
    let carol = Requester::new("User:carol", "/10.0.0.9");
    assert!(may(&acls, &c, carol, AclOperation::Write, "public"));
    assert!(!may(&acls, &c, carol, AclOperation::Read, "orders"));
}

#[test]
fn a_deny_wins_over_any_allow_and_is_bound_to_its_host() {
    let c = on(&AuthzConfig::default());
    let mut deny = bind(
        "User:alice",
        "orders",
        PatternType::Literal,
        AclOperation::Write,
        AclPermission::Deny,
    );
    deny.host = "10.0.0.1".into();
    let acls = [
        bind(
            "User:alice",
            "*",
            PatternType::Literal,
            AclOperation::All,
            AclPermission::Allow,
        ),
        deny,
    ];
    assert!(!may(&acls, &c, ALICE, AclOperation::Write, "orders"));
    assert!(may(&acls, &c, ALICE, AclOperation::Read, "orders"));
    let elsewhere = Requester::new("User:alice", "/10.0.0.2");
    assert!(may(&acls, &c, elsewhere, AclOperation::Write, "orders"));
}

#[test]
fn superusers_need_no_acl() {
    let c = AuthzConfig {
        enabled: true,
        superusers: vec!["User:admin".into()],
        allow_if_no_acl: false,
    };
    let deny_all = [bind(
        "User:*",
        "*",
        PatternType::Literal,
        AclOperation::All,
        AclPermission::Deny,
    )];
    let admin = Requester::new("User:admin", "/127.0.0.1");
    assert!(may(&deny_all, &c, admin, AclOperation::Delete, "orders"));
    assert!(!may(&deny_all, &c, ALICE, AclOperation::Describe, "orders"));
}

#[test]
fn an_allow_on_some_topic_is_enough_for_an_idempotent_producer_unless_denied() {
    let c = on(&AuthzConfig::default());
    let some = |acls: &[AclBinding]| {
        decide_on_some(&c, acls, ALICE, AclOperation::Write, ResourceType::Topic)
    };
    assert!(!some(&[]));
    let write = bind(
        "User:alice",
        "orders",
        PatternType::Prefixed,
        AclOperation::Write,
        AclPermission::Allow,
    );
    assert!(some(std::slice::from_ref(&write)));
    let read = bind(
        "User:alice",
        "orders",
        PatternType::Literal,
        AclOperation::Read,
        AclPermission::Allow,
    );
    assert!(!some(&[read]));
    let deny_all = bind(
        "User:alice",
        "*",
        PatternType::Literal,
        AclOperation::Write,
        AclPermission::Deny,
    );
    assert!(!some(&[write, deny_all]));
}
