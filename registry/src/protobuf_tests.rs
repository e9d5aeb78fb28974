use super::*;

#[test]
fn smoke() {
    let s = parse("syntax = \"proto3\"; package a; message M { string x = 1; map<string, int32> m = 2; }", &[]).unwrap();
    println!("{}", s.canonical());
}
