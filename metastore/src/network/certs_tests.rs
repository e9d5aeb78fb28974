use std::os::unix::fs::PermissionsExt as _;

use super::*;

#[test]
fn an_issued_certificate_is_valid_for_its_node_only() {
    let ca = ClusterCa::generate().expect("ca");
    let node = ca.issue(7).expect("issue");
    assert_eq!(node.node_id(), 7);
    check_node_certificate(&node.tls(&ca), 7).expect("valid for node 7");
    let err = check_node_certificate(&node.tls(&ca), 8).expect_err("not node 8's");
    assert!(err.to_string().contains("node-8.aerostream"), "{err}");
}

#[test]
fn a_certificate_from_another_ca_is_not_valid() {
    let ca = ClusterCa::generate().expect("ca");
    let other = ClusterCa::generate().expect("other ca");
    let node = other.issue(1).expect("issue");
    let mixed = RaftTls::from_pem(ca.cert_pem(), node.cert_pem(), node.key_pem()).expect("pem");
    check_node_certificate(&mixed, 1).expect_err("signed by another CA");
}

#[test]
fn files_written_for_a_cluster_load_back_and_a_saved_ca_issues_more() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = create_cluster_certificates(dir.path(), [1, 2]).expect("create");
    for id in [1, 2] {
        let tls = RaftTls::load(dir.path(), id).expect("load");
        check_node_certificate(&tls, id).expect("valid");
    }
    // a node added later gets its certificate from the saved CA
    let loaded = ClusterCa::load(dir.path()).expect("load the ca");
    assert_eq!(loaded.cert_pem(), ca.cert_pem());
    loaded
        .issue(3)
        .expect("issue")
        .save(dir.path())
        .expect("save");
    let tls = RaftTls::load(dir.path(), 3).expect("load");
    check_node_certificate(&tls, 3).expect("chains to the original CA");
}

#[test]
fn keys_are_readable_by_their_owner_only_and_never_overwritten() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = create_cluster_certificates(dir.path(), [1]).expect("create");
    for key in [CA_KEY_FILE.to_owned(), node_files(1).key] {
        let mode = std::fs::metadata(dir.path().join(&key))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{key}");
    }
    let before = std::fs::read(dir.path().join(CA_KEY_FILE)).expect("read");
    ClusterCa::generate()
        .expect("ca")
        .save(dir.path())
        .expect_err("an existing CA is kept");
    ca.issue(1)
        .expect("issue")
        .save(dir.path())
        .expect_err("an existing node key is kept");
    assert_eq!(
        std::fs::read(dir.path().join(CA_KEY_FILE)).expect("read"),
        before
    );
}

#[test]
fn a_ca_whose_key_is_not_its_certificates_cannot_issue() {
    let ca = ClusterCa::generate().expect("ca");
    let other_key = KeyPair::generate().expect("key").serialize_pem();
    let broken = ClusterCa::from_pem(ca.cert_pem(), &other_key).expect("parses");
    broken
        .issue(1)
        .expect_err("its certificates would not chain");
}

#[test]
fn ensuring_certificates_reuses_the_ca_and_issues_only_what_is_missing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = ensure_cluster_certificates(dir.path(), [1, 2]).expect("create");
    assert!(first.new_ca);
    assert_eq!(first.written.len(), 6, "{first:?}");
    let ca_before = std::fs::read(dir.path().join(CA_CERT_FILE)).expect("read");
    let second = ensure_cluster_certificates(dir.path(), [2, 3]).expect("add node 3");
    assert!(!second.new_ca, "the CA is reused");
    assert_eq!(second.kept, vec![2]);
    assert_eq!(second.written, vec![node_files(3).cert, node_files(3).key]);
    assert_eq!(
        std::fs::read(dir.path().join(CA_CERT_FILE)).expect("read"),
        ca_before
    );
    let tls = RaftTls::load(dir.path(), 3).expect("load");
    check_node_certificate(&tls, 3).expect("node 3 chains to the first CA");
    std::fs::remove_file(dir.path().join(node_files(1).key)).expect("rm");
    let err = ensure_cluster_certificates(dir.path(), [1]).expect_err("half a pair");
    assert!(err.to_string().contains("node-1.pem"), "{err}");
}
