use super::*;

fn config(pairs: &[(&str, &str)]) -> Config {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn urls_in_postgresql_and_jdbc_form() {
    let pg = parse_url("postgresql://ada:s3cret@db.example:6543/shop").unwrap();
    assert_eq!(pg.get_user(), Some("ada"));
    assert_eq!(pg.get_password(), Some(&b"s3cret"[..]));
    assert_eq!(pg.get_dbname(), Some("shop"));
    assert_eq!(pg.get_ports(), [6543]);
    assert_eq!(pg.get_hosts(), [Host::Tcp("db.example".into())]);

    let jdbc = parse_url("jdbc:postgresql://10.0.0.5:5433/orders?user=grace&password=pw").unwrap();
    assert_eq!(jdbc.get_hosts(), [Host::Tcp("10.0.0.5".into())]);
    assert_eq!(jdbc.get_ports(), [5433]);
    assert_eq!(jdbc.get_dbname(), Some("orders"));
    assert_eq!(jdbc.get_user(), Some("grace"));

    for bad in [
        "jdbc:mysql://h/db",
        "jdbc:postgresql:db",
        "http://h/db",
        "h:5432/db",
    ] {
        assert!(parse_url(bad).is_err(), "{bad} was accepted");
    }
}

#[test]
fn user_and_password_keys_override_the_url_and_the_password_is_never_shown() {
    let mut problems = Vec::new();
    let c = Connection::parse(
        &config(&[
            (
                "connection.url",
                "jdbc:postgresql://h:5433/db?user=u&password=inurl",
            ),
            ("connection.user", "other"),
            ("connection.password", "p@ss"),
        ]),
        &mut problems,
    )
    .unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(c.config.get_user(), Some("other"));
    assert_eq!(c.config.get_password(), Some(&b"p@ss"[..]));
    assert_eq!(c.shown(), "h:5433/db");
    assert!(!format!("{c:?}").contains("p@ss"));
}

#[test]
fn connection_problems_are_all_reported() {
    let mut problems = Vec::new();
    assert!(Connection::parse(&config(&[]), &mut problems).is_none());
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].0, "connection.url");

    let mut problems = Vec::new();
    let c = Connection::parse(
        &config(&[("connection.url", "postgresql://h/db?sslmode=require")]),
        &mut problems,
    );
    assert!(c.is_none());
    let keys: Vec<&str> = problems.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["connection.user", "connection.url"]);
    assert!(problems[1].1.contains("TLS"), "{problems:?}");
}

#[test]
fn identifiers_are_quoted_so_no_name_escapes() {
    assert_eq!(quote_ident("orders").unwrap(), "\"orders\"");
    assert_eq!(quote_ident("Mixed Case").unwrap(), "\"Mixed Case\"");
    assert_eq!(
        quote_ident("x\"; DROP TABLE t; --").unwrap(),
        "\"x\"\"; DROP TABLE t; --\""
    );
    assert!(quote_ident("").is_err());
    assert!(quote_ident("a\0b").is_err());
    assert_eq!(
        TableName::parse("sales.orders").quoted().unwrap(),
        "\"sales\".\"orders\""
    );
    assert_eq!(TableName::parse("orders").quoted().unwrap(), "\"orders\"");
}
