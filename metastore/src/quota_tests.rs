use super::*;

#[test]
fn the_most_specific_entity_comes_first_as_in_kafka() {
    let c = QuotaEntity::candidates("alice", "app");
    let named = |n: &str| Some(EntityName::Named(n.into()));
    assert_eq!(
        c[0],
        QuotaEntity {
            user: named("alice"),
            client_id: named("app")
        }
    );
    assert_eq!(
        c[2],
        QuotaEntity {
            user: named("alice"),
            client_id: None
        }
    );
    assert_eq!(
        c[5],
        QuotaEntity {
            user: Some(EntityName::Default),
            client_id: None
        }
    );
    assert_eq!(
        c[7],
        QuotaEntity {
            user: None,
            client_id: Some(EntityName::Default)
        }
    );
}

#[test]
fn unknown_keys_non_positive_values_and_empty_entities_are_refused() {
    assert_eq!(invalid_value(PRODUCER_BYTE_RATE, 1024.0), None);
    assert_eq!(invalid_value(REQUEST_PERCENTAGE, 50.0), None);
    assert!(invalid_value("controller_mutation_rate", 50.0).is_some());
    assert!(invalid_value(CONSUMER_BYTE_RATE, 0.0).is_some());
    assert!(invalid_value(CONSUMER_BYTE_RATE, f64::NAN).is_some());
    let nobody = QuotaEntity {
        user: None,
        client_id: None,
    };
    assert!(nobody.invalid().is_some());
    let empty = QuotaEntity {
        user: Some(EntityName::Named(String::new())),
        client_id: None,
    };
    assert!(empty.invalid().is_some());
}
