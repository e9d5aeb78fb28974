use super::*;
use kafka_protocol::ResponseError;

#[test]
fn offsets_out_of_range_end_the_run_and_leadership_changes_are_retried() {
    assert!(matches!(classify("t/0", 1), FetchError::Fatal(_)));
    assert!(matches!(classify("t/0", 6), FetchError::Retry(_)));
    assert!(matches!(classify("t/0", 3), FetchError::Retry(_)));
    assert_eq!(
        error_name(6),
        ResponseError::NotLeaderOrFollower.to_string()
    );
}
