use super::*;

fn avro(canonical: &str) -> StoredSchema {
    StoredSchema {
        schema_type: "AVRO".into(),
        schema: format!(" {canonical} "),
        canonical: canonical.into(),
        references: Vec::new(),
    }
}

fn register(
    r: &mut RegistryState,
    subject: &str,
    schema: StoredSchema,
) -> Result<(i32, i32), MetaError> {
    let expect_latest = r
        .subject(subject)
        .and_then(|s| s.latest_live())
        .map(|(n, _)| n);
    match r.apply(RegistryCommand::Register {
        subject: subject.into(),
        schema,
        expect_latest,
        id: None,
        version: None,
    })? {
        RegistryOutput::Registered { id, version } => Ok((id, version)),
        other => panic!("unexpected {other:?}"),
    }
}

fn code_of(e: MetaError) -> u32 {
    match e {
        MetaError::Registry { code, .. } => code,
        other => panic!("not a registry refusal: {other:?}"),
    }
}

#[test]
fn ids_are_global_and_versions_count_per_subject() {
    let mut r = RegistryState::default();
    assert_eq!(register(&mut r, "a-value", avro("A1")).unwrap(), (1, 1));
    assert_eq!(register(&mut r, "a-value", avro("A2")).unwrap(), (2, 2));
    // the same schema under another subject keeps its id, with version 1 there
    assert_eq!(register(&mut r, "b-value", avro("A2")).unwrap(), (2, 1));
    // registering it again under the same subject changes nothing
    assert_eq!(register(&mut r, "a-value", avro("A1")).unwrap(), (1, 1));
    assert_eq!(
        r.uses_of(2),
        vec![("a-value", 2, false), ("b-value", 1, false)]
    );
    // the text kept is the first one registered
    assert_eq!(r.schema(1).unwrap().schema, " A1 ");
}

#[test]
fn a_registration_checked_against_an_older_latest_version_is_stale() {
    let mut r = RegistryState::default();
    register(&mut r, "s", avro("A1")).unwrap();
    let stale = r.apply(RegistryCommand::Register {
        subject: "s".into(),
        schema: avro("A2"),
        expect_latest: None,
        id: None,
        version: None,
    });
    assert!(
        matches!(stale, Err(MetaError::StaleRequest { .. })),
        "{stale:?}"
    );
}

#[test]
fn deletes_are_soft_before_hard_and_ids_are_never_reused() {
    let mut r = RegistryState::default();
    register(&mut r, "s", avro("A1")).unwrap();
    register(&mut r, "s", avro("A2")).unwrap();
    let hard = |r: &mut RegistryState, v| {
        r.apply(RegistryCommand::DeleteVersion {
            subject: "s".into(),
            version: v,
            permanent: true,
        })
    };
    assert_eq!(
        code_of(hard(&mut r, 2).unwrap_err()),
        code::VERSION_NOT_SOFT_DELETED
    );
    let soft = RegistryCommand::DeleteVersion {
        subject: "s".into(),
        version: 2,
        permanent: false,
    };
    assert_eq!(r.apply(soft.clone()).unwrap(), RegistryOutput::Version(2));
    assert_eq!(
        code_of(r.apply(soft).unwrap_err()),
        code::VERSION_SOFT_DELETED
    );
    assert_eq!(r.subject("s").unwrap().latest_live().unwrap().0, 1);
    // a new version after a soft delete takes the next number
    assert_eq!(register(&mut r, "s", avro("A3")).unwrap(), (3, 3));
    assert_eq!(hard(&mut r, 2).unwrap(), RegistryOutput::Version(2));
    assert!(r.schema(2).is_none(), "no version holds id 2 any more");
    assert_eq!(register(&mut r, "s", avro("A2")).unwrap(), (4, 4));
    // a whole subject: soft first, then hard
    let subject = |permanent| RegistryCommand::DeleteSubject {
        subject: "s".into(),
        permanent,
    };
    assert_eq!(
        code_of(r.apply(subject(true)).unwrap_err()),
        code::SUBJECT_NOT_SOFT_DELETED
    );
    assert_eq!(
        r.apply(subject(false)).unwrap(),
        RegistryOutput::Versions(vec![1, 3, 4])
    );
    assert_eq!(r.subjects(false).count(), 0);
    assert_eq!(r.subjects(true).count(), 1);
    assert_eq!(
        r.apply(subject(true)).unwrap(),
        RegistryOutput::Versions(vec![1, 3, 4])
    );
    assert!(r.subject("s").is_none());
    assert_eq!(
        code_of(r.apply(subject(false)).unwrap_err()),
        code::SUBJECT_NOT_FOUND
    );
}

#[test]
fn a_referenced_version_cannot_be_deleted_and_a_missing_reference_is_refused() {
    let mut r = RegistryState::default();
    register(&mut r, "address", avro("Address")).unwrap();
    let mut user = avro("User");
    user.references = vec![SchemaRef {
        name: "Address".into(),
        subject: "address".into(),
        version: 1,
    }];
    let (id, _) = register(&mut r, "user-value", user.clone()).unwrap();
    assert_eq!(r.referenced_by("address", 1), vec![id]);
    let delete = RegistryCommand::DeleteVersion {
        subject: "address".into(),
        version: 1,
        permanent: false,
    };
    assert_eq!(
        code_of(r.apply(delete).unwrap_err()),
        code::REFERENCE_EXISTS
    );
    user.references[0].version = 7;
    user.canonical = "User2".into();
    assert_eq!(
        code_of(register(&mut r, "user-value", user).unwrap_err()),
        code::INVALID_SCHEMA
    );
}

#[test]
fn modes_and_levels_fall_back_from_subject_to_global() {
    let mut r = RegistryState::default();
    assert_eq!(r.compatibility(Some("s")), DEFAULT_COMPATIBILITY);
    r.apply(RegistryCommand::SetCompatibility {
        subject: None,
        level: Some("FULL".into()),
    })
    .unwrap();
    r.apply(RegistryCommand::SetCompatibility {
        subject: Some("s".into()),
        level: Some("NONE".into()),
    })
    .unwrap();
    assert_eq!(r.compatibility(Some("s")), "NONE");
    assert_eq!(r.compatibility(Some("t")), "FULL");
    assert_eq!(r.own_setting(Setting::Compatibility, Some("t")), None);
    r.apply(RegistryCommand::SetMode {
        subject: Some("s".into()),
        mode: Some("READONLY".into()),
    })
    .unwrap();
    assert_eq!(
        code_of(register(&mut r, "s", avro("A")).unwrap_err()),
        code::OPERATION_NOT_PERMITTED
    );
    register(&mut r, "t", avro("A")).unwrap();
    // IMPORT: ids and versions come from the caller
    r.apply(RegistryCommand::SetMode {
        subject: None,
        mode: Some("IMPORT".into()),
    })
    .unwrap();
    let imported = r
        .apply(RegistryCommand::Register {
            subject: "u".into(),
            schema: avro("B"),
            expect_latest: None,
            id: Some(100),
            version: Some(5),
        })
        .unwrap();
    assert_eq!(
        imported,
        RegistryOutput::Registered {
            id: 100,
            version: 5
        }
    );
    let clash = r.apply(RegistryCommand::Register {
        subject: "v".into(),
        schema: avro("C"),
        expect_latest: None,
        id: Some(100),
        version: None,
    });
    assert_eq!(code_of(clash.unwrap_err()), code::OPERATION_NOT_PERMITTED);
    // new ids continue above the imported ones
    r.apply(RegistryCommand::SetMode {
        subject: None,
        mode: None,
    })
    .unwrap();
    assert_eq!(register(&mut r, "w", avro("D")).unwrap(), (101, 1));
}
