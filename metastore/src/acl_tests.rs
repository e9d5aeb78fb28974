use super::*;

fn binding(name: &str, pattern: PatternType, op: AclOperation) -> AclBinding {
    AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: name.into(),
        pattern,
        principal: "User:alice".into(),
        host: "*".into(),
        operation: op,
        permission: AclPermission::Allow,
    }
}

#[test]
fn wire_codes_round_trip_and_unknown_and_any_have_no_value() {
    for t in ResourceType::ALL {
        assert_eq!(ResourceType::from_code(t.code()), Some(*t));
    }
    for o in AclOperation::ALL {
        assert_eq!(AclOperation::from_code(o.code()), Some(*o));
    }
    for code in [0, 1, 15, -1] {
        assert_eq!(AclOperation::from_code(code), None, "{code}");
    }
    assert_eq!(ResourceType::from_code(1), None);
    assert_eq!(
        AclOperation::from_name("describe-configs"),
        Some(AclOperation::DescribeConfigs)
    );
    assert_eq!(PatternFilter::from_code(2), Some(PatternFilter::Match));
    assert_eq!(
        PatternFilter::from_code(4),
        Some(PatternFilter::Exactly(PatternType::Prefixed))
    );
}

#[test]
fn read_write_delete_and_alter_imply_describe_but_nothing_else_does() {
    use AclOperation::*;
    for op in [Read, Write, Delete, Alter, All, Describe] {
        assert!(op.implies(Describe), "{op}");
    }
    for op in [Create, DescribeConfigs, ClusterAction, IdempotentWrite] {
        assert!(!op.implies(Describe), "{op}");
    }
    assert!(AlterConfigs.implies(DescribeConfigs));
    assert!(!Read.implies(Write));
    assert!(All.implies(IdempotentWrite));
}

#[test]
fn literal_patterns_match_their_name_or_everything_and_prefixed_match_prefixes() {
    let lit = binding("orders", PatternType::Literal, AclOperation::Read);
    assert!(lit.covers("orders"));
    assert!(!lit.covers("orders-eu"));
    let all = binding("*", PatternType::Literal, AclOperation::Read);
    assert!(all.covers("anything"));
    let pre = binding("orders", PatternType::Prefixed, AclOperation::Read);
    assert!(pre.covers("orders-eu"));
    assert!(!pre.covers("order"));
}

#[test]
fn bindings_kafka_refuses_are_invalid() {
    let ok = binding("t", PatternType::Literal, AclOperation::Read);
    assert_eq!(ok.invalid(), None);
    let cases = [
        AclBinding {
            resource_name: String::new(),
            ..ok.clone()
        },
        AclBinding {
            principal: "alice".into(),
            ..ok.clone()
        },
        AclBinding {
            resource_type: ResourceType::Cluster,
            ..ok.clone()
        },
        AclBinding {
            resource_name: "*".into(),
            pattern: PatternType::Prefixed,
            ..ok.clone()
        },
        AclBinding {
            host: String::new(),
            ..ok.clone()
        },
    ];
    for b in cases {
        assert!(b.invalid().is_some(), "{b:?}");
    }
}

#[test]
fn filters_select_by_each_field_and_match_selects_what_applies_to_a_name() {
    let lit = binding("orders", PatternType::Literal, AclOperation::Read);
    let pre = binding("ord", PatternType::Prefixed, AclOperation::Write);
    let star = binding("*", PatternType::Literal, AclOperation::Read);
    let all = [lit.clone(), pre.clone(), star.clone()];
    let picked = |f: &AclFilter| all.iter().filter(|b| f.matches(b)).count();
    assert_eq!(picked(&AclFilter::any()), 3);
    let by_name = AclFilter {
        resource_name: Some("orders".into()),
        ..AclFilter::any()
    };
    assert_eq!(picked(&by_name), 1);
    let applying = AclFilter {
        pattern: PatternFilter::Match,
        ..by_name.clone()
    };
    assert_eq!(picked(&applying), 3);
    let prefixed = AclFilter {
        pattern: PatternFilter::Exactly(PatternType::Prefixed),
        ..AclFilter::any()
    };
    assert_eq!(picked(&prefixed), 1);
    let writes = AclFilter {
        operation: Some(AclOperation::Write),
        ..AclFilter::any()
    };
    assert_eq!(picked(&writes), 1);
    let bob = AclFilter {
        principal: Some("User:bob".into()),
        ..AclFilter::any()
    };
    assert_eq!(picked(&bob), 0);
    let groups = AclFilter {
        resource_type: Some(ResourceType::Group),
        ..AclFilter::any()
    };
    assert_eq!(picked(&groups), 0);
}
