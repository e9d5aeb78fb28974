use super::*;

#[test]
fn cluster_ids_look_like_kafkas() {
    let a = new_cluster_id();
    assert_eq!(a.len(), 22);
    assert!(a
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    assert_ne!(a, new_cluster_id());
}
