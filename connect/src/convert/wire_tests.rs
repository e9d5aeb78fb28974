use super::*;

#[test]
fn a_framed_value_splits_into_its_schema_id_and_payload() {
    let framed = frame(258, b"payload");
    assert_eq!(&framed[..5], &[0, 0, 0, 1, 2]);
    let (id, rest) = split(&framed).expect("framed");
    assert_eq!(id, 258);
    assert_eq!(rest, b"payload");
}

#[test]
fn bytes_not_in_the_wire_format_are_refused_with_the_reason() {
    let err = split(b"{\"seq\":1}").expect_err("JSON is not framed");
    assert!(err.to_string().contains("first byte is 123"), "{err}");
    let err = split(&[0, 0, 1]).expect_err("too short");
    assert!(err.to_string().contains("3 bytes long"), "{err}");
    let err = split(&[]).expect_err("empty");
    assert!(err.to_string().contains("empty"), "{err}");
}

#[test]
fn message_indexes_read_the_single_zero_as_the_first_message() {
    let (indexes, rest) = message_indexes(&[0, 8, 1]).expect("indexes");
    assert_eq!(indexes, vec![0]);
    assert_eq!(rest, &[8, 1]);
}

#[test]
fn message_indexes_are_zigzag_varints_after_their_count() {
    // count 2 (zigzag 4), indexes 1 (2) and 0 (0), then the payload
    let (indexes, rest) = message_indexes(&[4, 2, 0, 8, 1]).expect("indexes");
    assert_eq!(indexes, vec![1, 0]);
    assert_eq!(rest, &[8, 1]);
    assert_eq!(encode_message_indexes(&[1, 0]), vec![4, 2, 0]);
    assert_eq!(encode_message_indexes(&[0]), vec![0]);
    let big = encode_message_indexes(&[300]);
    assert_eq!(message_indexes(&big).expect("indexes").0, vec![300]);
}

#[test]
fn truncated_or_negative_message_indexes_are_refused() {
    assert!(message_indexes(&[4, 2]).is_err(), "one index of two");
    assert!(message_indexes(&[0x80]).is_err(), "a varint cut short");
    assert!(message_indexes(&[2, 1]).is_err(), "index -1");
    assert!(message_indexes(&[3]).is_err(), "count -2");
}
