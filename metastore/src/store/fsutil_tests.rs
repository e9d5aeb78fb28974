use super::*;

#[test]
fn atomic_write_replaces_contents_and_leaves_no_temp_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("vote.json");
    assert_eq!(read_optional(&p).unwrap(), None);
    write_atomic(&p, b"one").unwrap();
    write_atomic(&p, b"two").unwrap();
    assert_eq!(read_optional(&p).unwrap().as_deref(), Some(&b"two"[..]));
    assert!(!p.with_extension("tmp").exists());
}
