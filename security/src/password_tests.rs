use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use super::*;

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
}

/// One user, alice, with a SHA-512 credential for "right" of Kafka's
/// tools' 4096 iterations (not the 8192 credentials made here get).
fn alice() -> ScramCredential {
    scram::credential(ScramMechanism::Sha512, "right", 4096).expect("a credential")
}

/// `user`'s credentials where alice is the only user.
fn lookup<'a>(
    alice: &'a ScramCredential,
    user: &'a str,
) -> impl Fn(ScramMechanism) -> Option<ScramCredential> + 'a {
    move |m| (user == "alice" && m == ScramMechanism::Sha512).then(|| alice.clone())
}

#[test]
fn an_unknown_user_costs_the_pbkdf2_of_a_known_one() {
    let (a, now) = (alice(), Instant::now());
    let p = Passwords::default();
    let check = |user: &str, password: &str| {
        let before = p.iterations_run();
        let outcome = p.check_with(lookup(&a, user), user, password, ip(1), now);
        (outcome, p.iterations_run() - before)
    };
    let unknown = |user: &str| Err(LoginError::UnknownUser(user.into()));
    // before any user was checked: as costly as a credential made here
    assert_eq!(check("nobody", "x"), (unknown("nobody"), 8192));
    assert_eq!(check("alice", "right"), (Ok(()), 4096));
    let wrong = Err(LoginError::WrongPassword("alice".into()));
    assert_eq!(check("alice", "wrong"), (wrong, 4096));
    assert_eq!(
        check("mallory", "right"),
        (unknown("mallory"), 4096),
        "the same PBKDF2 work as a known user's, so the answer takes as long"
    );
}

#[test]
fn an_address_over_its_failures_is_refused_unchecked_and_others_are_not() {
    let p = Passwords::new(FailedLoginLimit {
        burst: 3,
        per_minute: 1.0,
    });
    let (a, now) = (alice(), Instant::now());
    for guess in ["guess-1", "guess-2", "guess-3"] {
        assert_eq!(
            p.check_with(lookup(&a, "alice"), "alice", guess, ip(1), now),
            Err(LoginError::WrongPassword("alice".into()))
        );
    }
    let ran = p.iterations_run();
    for password in ["guess-4", "right"] {
        assert_eq!(
            p.check_with(lookup(&a, "alice"), "alice", password, ip(1), now),
            Err(LoginError::TooManyFailures(ip(1))),
            "refused whatever the password: it is not checked"
        );
    }
    assert_eq!(p.iterations_run(), ran, "no PBKDF2 for a refused address");
    assert_eq!(p.refused(), 2);
    // the same address written as IPv6 is the same address
    let mapped = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
    assert!(matches!(
        p.check_with(lookup(&a, "alice"), "alice", "right", mapped, now),
        Err(LoginError::TooManyFailures(_))
    ));
    // another address is checked as usual
    assert_eq!(
        p.check_with(lookup(&a, "alice"), "alice", "right", ip(2), now),
        Ok(())
    );
    assert_eq!(
        p.check_with(lookup(&a, "alice"), "alice", "guess-5", ip(2), now),
        Err(LoginError::WrongPassword("alice".into()))
    );
    // a minute later the first address has one more try
    let later = now + Duration::from_secs(60);
    assert_eq!(
        p.check_with(lookup(&a, "alice"), "alice", "right", ip(1), later),
        Ok(())
    );
}

#[test]
fn logins_that_succeed_use_up_nothing_and_ipv6_counts_per_64() {
    let p = Passwords::new(FailedLoginLimit {
        burst: 2,
        per_minute: 0.0,
    });
    let (a, now) = (alice(), Instant::now());
    for _ in 0..5 {
        assert_eq!(
            p.check_with(lookup(&a, "alice"), "alice", "right", ip(1), now),
            Ok(())
        );
    }
    let host = |last: u16| IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 0, 0, 0, last));
    for last in [1, 2] {
        let guess = format!("guess-{last}");
        let refused = p.check_with(lookup(&a, "alice"), "alice", &guess, host(last), now);
        assert!(refused.is_err());
    }
    assert!(
        matches!(
            p.check_with(lookup(&a, "alice"), "alice", "right", host(3), now),
            Err(LoginError::TooManyFailures(_))
        ),
        "another address of the same /64 shares its allowance"
    );
    let elsewhere = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 3, 0, 0, 0, 1));
    assert_eq!(
        p.check_with(lookup(&a, "alice"), "alice", "right", elsewhere, now),
        Ok(())
    );
}

/// A client retrying one wrong password (librdkafka logs in again at once
/// after a failure) costs one check and one token, not one per retry, so
/// it locks no one else on its address out; a new credential for the user
/// makes the remembered failure stale.
#[test]
fn a_wrong_password_retried_is_refused_from_memory_until_the_credential_changes() {
    let p = Passwords::new(FailedLoginLimit {
        burst: 3,
        per_minute: 0.0,
    });
    let (a, now) = (alice(), Instant::now());
    for _ in 0..20 {
        assert_eq!(
            p.check_with(lookup(&a, "alice"), "alice", "stale", ip(1), now),
            Err(LoginError::WrongPassword("alice".into()))
        );
        assert_eq!(
            p.check_with(lookup(&a, "ghost"), "ghost", "stale", ip(1), now),
            Err(LoginError::UnknownUser("ghost".into()))
        );
    }
    assert_eq!(p.iterations_run(), 2 * 4096, "one check each");
    assert_eq!(p.repeated(), 38);
    assert_eq!(p.refused(), 0, "the address still has its allowance");

    // the password is set to what the client sends: checked again, accepted
    let renewed = scram::credential(ScramMechanism::Sha512, "stale", 4096).expect("a credential");
    assert_eq!(
        p.check_with(lookup(&renewed, "alice"), "alice", "stale", ip(1), now),
        Ok(())
    );
    // two tokens went to the two first failures, the third came back: one
    // new guess is checked, the next refused unchecked, and a remembered
    // failure is still answered as one
    assert_eq!(
        p.check_with(lookup(&a, "alice"), "alice", "guess-1", ip(1), now),
        Err(LoginError::WrongPassword("alice".into()))
    );
    assert_eq!(
        p.check_with(lookup(&a, "alice"), "alice", "guess-2", ip(1), now),
        Err(LoginError::TooManyFailures(ip(1)))
    );
    assert_eq!(
        p.check_with(lookup(&a, "alice"), "alice", "stale", ip(1), now),
        Err(LoginError::WrongPassword("alice".into()))
    );
}
