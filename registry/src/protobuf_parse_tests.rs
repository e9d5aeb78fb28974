//! Parsing Protobuf schemas (imports of references and of the well-known
//! types, the compatibility of imported types) and their canonical text.

use super::tests::{case, check, check_with, p2, p3, parsed, reference};
use super::*;

#[test]
fn invalid_text_is_refused_with_file_and_line() {
    let err = parse(
        "syntax = \"proto3\";\nmessage User {\n  string name = ;\n}\n",
        &[],
    )
    .expect_err("invalid text");
    let SchemaError::Invalid(message) = err;
    assert!(message.contains("schema.proto:3:"), "{message}");
}

#[test]
fn semantic_errors_are_refused() {
    for (text, needle) in [
        (p3("message User { Missing m = 1; }"), "Missing"),
        (p3("message User { int32 a = 1; int32 b = 1; }"), "1"),
        (
            p3("import \"nowhere.proto\";\nmessage User { }"),
            "nowhere.proto",
        ),
        ("not a proto file at all".to_owned(), "schema.proto"),
    ] {
        match parse(&text, &[]) {
            Err(SchemaError::Invalid(message)) => {
                assert!(message.contains(needle), "{message} lacks {needle}")
            }
            Ok(_) => panic!("accepted: {text}"),
        }
    }
}

#[test]
fn reference_resolved_through_an_import() {
    let other = reference(
        "other.proto",
        "syntax = \"proto3\"; package other; message Thing { string id = 1; }",
    );
    let schema = parsed(
        &p3("import \"other.proto\";\nmessage User { other.Thing thing = 1; }"),
        std::slice::from_ref(&other),
    );
    assert!(schema.canonical().contains("import \"other.proto\";"));
    assert!(schema.canonical().contains(".other.Thing thing = 1;"));
    // Without the reference the import does not resolve.
    let err = parse(
        &p3("import \"other.proto\";\nmessage User { other.Thing thing = 1; }"),
        &[],
    );
    assert!(err.is_err());
}

#[test]
fn references_of_references_resolve() {
    let base = reference(
        "base.proto",
        "syntax = \"proto3\"; package b; message Id { int64 v = 1; }",
    );
    let mid = reference(
        "mid.proto",
        "syntax = \"proto3\"; package m; import \"base.proto\"; message Ref { b.Id id = 1; }",
    );
    parsed(
        &p3("import \"mid.proto\";\nmessage User { m.Ref r = 1; }"),
        &[base, mid],
    );
}

#[test]
fn reference_of_another_type_is_refused() {
    let avro = Resolved {
        name: "x.proto".into(),
        schema_type: SchemaType::Avro,
        schema: "\"string\"".into(),
    };
    assert!(parse(&p3("message User { }"), &[avro]).is_err());
}

#[test]
fn well_known_type_import() {
    let schema = parsed(
        &p3("import \"google/protobuf/timestamp.proto\";\nimport \"google/protobuf/wrappers.proto\";\n\
             message E { google.protobuf.Timestamp at = 1; google.protobuf.StringValue s = 2; }"),
        &[],
    );
    assert!(schema
        .canonical()
        .contains(".google.protobuf.Timestamp at = 1;"));
}

#[test]
fn canonical_ignores_layout_and_comments() {
    let a = "syntax = \"proto3\";\npackage demo;\n\
             import \"google/protobuf/timestamp.proto\";\n\
             option java_package = \"com.example\";\n\
             message User { string name = 1; google.protobuf.Timestamp at = 2; map<string, int32> m = 3;\n\
             oneof id { int32 a = 4; string b = 5; } enum Kind { A = 0; B = 1; } Kind k = 6; }\n";
    let b = "// A user.\nsyntax   =  'proto3' ;\n\n/* the package */ package   demo ;\n\
             import 'google/protobuf/timestamp.proto';   option java_package='com.example';\n\
             message User {\n  // their name\n  string name = 1;\n\
             .google.protobuf.Timestamp   at = 2;   map < string , int32 > m = 3;\n\
             oneof id {\n    int32 a = 4;\n    string b = 5;\n  }\n\
             enum Kind {\n    A = 0;\n    B = 1;\n  }\n  User.Kind k = 6;\n}\n";
    assert_eq!(parsed(a, &[]).canonical(), parsed(b, &[]).canonical());
}

#[test]
fn canonical_differs_when_meaning_differs() {
    let base = p3("message User { string name = 1; int32 age = 2; }");
    let canonical = parsed(&base, &[]).canonical().to_owned();
    for other in [
        p3("message User { string name = 1; int64 age = 2; }"),
        p3("message User { string name = 1; int32 age = 3; }"),
        p3("message User { string name = 1; int32 years = 2; }"),
        p3("message User { string name = 1; repeated int32 age = 2; }"),
        p3("message User { string name = 1; optional int32 age = 2; }"),
        p3("message User { string name = 1; int32 age = 2 [deprecated = true]; }"),
        p3("message User { string name = 1; int32 age = 2 [json_name = \"AGE\"]; }"),
        p3("message User { string name = 1; int32 age = 2; reserved 3; }"),
        p3("message Person { string name = 1; int32 age = 2; }"),
        p3("option java_package = \"x\";\nmessage User { string name = 1; int32 age = 2; }"),
        "syntax = \"proto3\"; package other; message User { string name = 1; int32 age = 2; }"
            .to_owned(),
        p2("message User { optional string name = 1; optional int32 age = 2; }"),
    ] {
        assert_ne!(canonical, parsed(&other, &[]).canonical(), "{other}");
    }
}

#[test]
fn canonical_keeps_message_order() {
    let ab = parsed(&p3("message A { } message B { }"), &[]);
    let ba = parsed(&p3("message B { } message A { }"), &[]);
    assert_ne!(ab.canonical(), ba.canonical());
}

#[test]
fn canonical_renders_proto2_details() {
    let schema = parsed(
        &p2("message User { required string name = 1 [default = \"x\"]; optional int32 n = 2 [packed = false];\n\
             extensions 100 to 199; }\n\
             extend User { optional int32 extra = 100; }\n\
             service Users { rpc Get(User) returns (stream User); }"),
        &[],
    );
    let text = schema.canonical();
    assert!(
        text.contains("required string name = 1 [default = \"x\"];"),
        "{text}"
    );
    assert!(text.contains("extensions 100 to 199;"), "{text}");
    assert!(
        text.contains("extend .demo.User { optional int32 extra = 100; }"),
        "{text}"
    );
    assert!(
        text.contains("rpc Get(.demo.User) returns (stream .demo.User);"),
        "{text}"
    );
}

#[test]
fn canonical_text_parses_again_to_itself() {
    let text = p3("import \"google/protobuf/timestamp.proto\";\n\
         message User { string name = 1; map<string, Inner> m = 2; message Inner { int32 x = 1; }\n\
         oneof id { int32 a = 4; string b = 5; } optional int32 o = 6; google.protobuf.Timestamp t = 7;\n\
         reserved 10 to 12; reserved \"old\"; }");
    let first = parsed(&text, &[]);
    let second = parsed(first.canonical(), &[]);
    assert_eq!(first.canonical(), second.canonical());
}

#[test]
fn imported_references() {
    let v1 = reference(
        "address.proto",
        "syntax = \"proto3\"; package geo; message Address { string city = 1; }",
    );
    let v2 = reference(
        "address_v2.proto",
        "syntax = \"proto3\"; package geo; message Address { int32 city = 1; }",
    );
    let v3 = reference(
        "address_v3.proto",
        "syntax = \"proto3\"; package geo; message Address { string city = 1; string zip = 2; }",
    );
    let refs = [v1, v2, v3];
    let user = |import: &str| {
        p3(&format!(
            "import \"{import}\";\nmessage User {{ geo.Address home = 1; }}"
        ))
    };
    check_with(
        &[
            case(
                "imported type changed incompatibly",
                user("address.proto"),
                user("address_v2.proto"),
                false,
            ),
            case(
                "imported type changed compatibly",
                user("address.proto"),
                user("address_v3.proto"),
                true,
            ),
            case(
                "imported type replaced by a local one of the same name",
                user("address.proto"),
                p3("message User { Address home = 1; } message Address { string city = 1; }"),
                true,
            ),
        ],
        &refs,
    );
}

#[test]
fn well_known_types() {
    let ts = "import \"google/protobuf/timestamp.proto\";\n";
    let dur = "import \"google/protobuf/duration.proto\";\n";
    check(&[
        case(
            "well-known type kept",
            p3(&format!(
                "{ts}message E {{ google.protobuf.Timestamp at = 1; }}"
            )),
            p3(&format!(
                "{ts}message E {{ google.protobuf.Timestamp when = 1; int32 x = 2; }}"
            )),
            true,
        ),
        case(
            "well-known type replaced by another",
            p3(&format!(
                "{ts}{dur}message E {{ google.protobuf.Timestamp at = 1; }}"
            )),
            p3(&format!(
                "{ts}{dur}message E {{ google.protobuf.Duration at = 1; }}"
            )),
            false,
        ),
        case(
            "well-known type replaced by a scalar",
            p3(&format!(
                "{ts}message E {{ google.protobuf.Timestamp at = 1; }}"
            )),
            p3("message E { int64 at = 1; }"),
            false,
        ),
    ]);
}
