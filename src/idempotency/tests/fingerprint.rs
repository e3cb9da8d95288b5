use super::super::fingerprint::{SIP_KEY, SipHasher24, hash_bytes};
use super::super::*;

/// Every hashing a fingerprint is taken with: what a fingerprint tells apart is the same for each.
const BOTH: [Hashing; 2] = [Hashing::Shared, Hashing::InProcess];

fn fp_with(body: &str, hashing: Hashing) -> Fingerprint {
    fingerprint("/mcp", body.as_bytes(), hashing)
        .unwrap()
        .fingerprint
}

#[test]
fn siphash_matches_the_reference_vectors() {
    // SipHash-2-4 paper, appendix A: key 00..0f, message 00..(n-1).
    let k0 = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
    let k1 = u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]);
    let message: Vec<u8> = (0..15).collect();
    for (n, want) in [
        (0, 0x726f_db47_dd0e_0e31),
        (1, 0x74f8_39c5_93dc_67fd),
        (15, 0xa129_ca61_49be_45e5),
    ] {
        let mut h = SipHasher24::new(k0, k1);
        h.write(&message[..n]);
        assert_eq!(h.finish(), want, "n = {n}");
    }
    // Streaming in pieces is the same as at once.
    let mut whole = SipHasher24::new(k0, k1);
    whole.write(&message);
    let mut parts = SipHasher24::new(k0, k1);
    for piece in message.chunks(4) {
        parts.write(piece);
    }
    assert_eq!(whole.finish(), parts.finish());
}

/// Whole words are compressed at once and a tail a byte at a time: any cuts between writes
/// give the hash of the bytes written whole, which one write of a byte at a time gives too.
#[test]
fn siphash_is_the_same_at_any_cuts() {
    let message: Vec<u8> = (0..70u8).map(|b| b.wrapping_mul(37)).collect();
    for len in 0..=message.len() {
        let bytes = &message[..len];
        let mut whole = SipHasher24::new(SIP_KEY.0, SIP_KEY.1);
        whole.write(bytes);
        let whole = whole.finish();
        for cut in 1..=9 {
            let mut parts = SipHasher24::new(SIP_KEY.0, SIP_KEY.1);
            for piece in bytes.chunks(cut) {
                parts.write(piece);
            }
            assert_eq!(parts.finish(), whole, "len {len}, pieces of {cut}");
        }
    }
}

#[test]
fn hash_is_fnv1a_and_fixed_key_siphash() {
    let h = hash_bytes(b"a");
    assert_eq!((h >> 64) as u64, 0xaf63_dc4c_8601_ec8c);
    let mut sip = SipHasher24::new(SIP_KEY.0, SIP_KEY.1);
    sip.write(b"a");
    assert_eq!(h as u64, sip.finish());
}

#[test]
fn pinned_across_builds() {
    // Replicas and restarts must agree (records live in Redis): if this changes, bump DOMAIN
    // in fingerprint.rs so old records stop matching instead of matching wrongly.
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":[1,2.5,"x",null,true]}}}"#;
    let shared = fp_with(body, Hashing::Shared);
    assert_eq!(shared.to_hex(), "616be8e5e85d7ac572930357344b72df");
    // The memory store's is another hash of the same stream.
    assert_ne!(fp_with(body, Hashing::InProcess), shared);
}

#[test]
fn ignores_id_and_meta_only() {
    for hashing in BOTH {
        let fp = |body: &str| fp_with(body, hashing);
        let a = fp(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"cents":100},"_meta":{"progressToken":1}}}"#,
        );
        let b = fp(
            r#"{"jsonrpc":"2.0","id":"other","method":"tools/call","params":{"name":"pay","arguments":{"cents":100},"_meta":{"progressToken":9,"x":1}}}"#,
        );
        let c = fp(
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pay","arguments":{"cents":100}}}"#,
        );
        assert_eq!(a, b);
        assert_eq!(a, c);
        // An argument change is a different request.
        let d = fp(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"cents":101}}}"#,
        );
        assert_ne!(a, d);
        // `_meta` elsewhere than `params` is part of the request.
        let e = fp(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"cents":100,"_meta":1}}}"#,
        );
        assert_ne!(a, e);
        // A notification is not the same as a request.
        let f = fp(
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"pay","arguments":{"cents":100}}}"#,
        );
        assert_ne!(a, f);
    }
}

#[test]
fn member_order_and_whitespace_do_not_matter() {
    for hashing in BOTH {
        let fp = |body: &str| fp_with(body, hashing);
        let a =
            fp(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":1,"y":{"b":2,"a":[3,4]}}}"#);
        let b = fp(
            "{ \"params\" : { \"y\" : {\"a\":[3, 4], \"b\":2}, \"x\":1 }, \"method\":\"m\",\n \"id\":7, \"jsonrpc\":\"2.0\" }",
        );
        assert_eq!(a, b);
        // Array order does.
        let c =
            fp(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":1,"y":{"b":2,"a":[4,3]}}}"#);
        assert_ne!(a, c);
        // Unambiguous: moving characters between strings is a change.
        assert_ne!(
            fp(r#"{"params":{"a":"bc","d":""}}"#),
            fp(r#"{"params":{"a":"b","d":"c"}}"#)
        );
    }
}

#[test]
fn target_is_part_of_the_request() {
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    for hashing in BOTH {
        let a = fingerprint("/mcp", body, hashing).unwrap().fingerprint;
        let b = fingerprint("/other", body, hashing).unwrap().fingerprint;
        assert_ne!(a, b);
    }
}

#[test]
fn keeps_the_raw_ids_in_request_order() {
    for hashing in BOTH {
        let single = fingerprint(
            "/",
            br#"{"jsonrpc":"2.0","id": "a\u0062" ,"method":"ping"}"#,
            hashing,
        )
        .unwrap();
        assert_eq!(single.ids, vec![r#""a\u0062""#.to_owned()]);
        let batch = br#"[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":"z","method":"ping"}]"#;
        let batch = fingerprint("/", batch, hashing).unwrap();
        assert_eq!(batch.ids, vec!["3".to_owned(), "\"z\"".to_owned()]);
        // The same batch with other ids fingerprints the same.
        let again = br#"[{"jsonrpc":"2.0","id":8,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":9,"method":"ping"}]"#;
        assert_eq!(
            fingerprint("/", again, hashing).unwrap().fingerprint,
            batch.fingerprint
        );
    }
}

#[test]
fn not_json_is_none() {
    for hashing in BOTH {
        assert_eq!(fingerprint("/", b"not json", hashing), None);
        assert_eq!(fingerprint("/", b"{\"id\":1", hashing), None);
        assert_eq!(fingerprint("/", b"\"a string\"", hashing), None);
    }
}

#[test]
fn hex_round_trips() {
    let f = Fingerprint(0x00ff_0000_0000_0000_0000_0000_0000_0001);
    assert_eq!(Fingerprint::from_hex(f.to_hex().as_bytes()), Some(f));
    assert_eq!(
        Fingerprint::from_hex(b"+0000000000000000000000000000001"),
        None
    );
    assert_eq!(Fingerprint::from_hex(b"00"), None);
}

#[test]
fn keys_are_scoped_and_checked() {
    let a = Key::new(b"abc-123", b"Bearer one").unwrap();
    // The stored form (a Redis key outlives the process that wrote it): the scope's hash in
    // 32 lower-case hex digits, a colon, the key.
    let scope = hash_bytes(b"Bearer one");
    assert_eq!(a.as_str(), format!("{scope:032x}:abc-123"));
    assert_eq!(
        Key::new(b"k", b"").unwrap().as_str(),
        format!("{:032x}:k", hash_bytes(b""))
    );
    assert_eq!(Key::new(b"\"abc-123\"", b"Bearer one"), Some(a.clone()));
    assert_eq!(Key::new(b"  abc-123 ", b"Bearer one"), Some(a.clone()));
    assert_ne!(Key::new(b"abc-123", b"Bearer two"), Some(a.clone()));
    assert_eq!(Key::new(b"", b""), None);
    assert_eq!(Key::new(b"\"\"", b""), None);
    assert_eq!(Key::new(b"a\x01b", b""), None);
    assert_eq!(Key::new("é".as_bytes(), b""), None);
    assert!(Key::new(&[b'k'; MAX_KEY_LEN], b"").is_some());
    assert_eq!(Key::new(&[b'k'; MAX_KEY_LEN + 1], b""), None);
}

/// The memory store's map takes the hash a key carries: the same for a key read twice (quoted
/// or not), another for another scope.
#[test]
fn a_key_read_twice_carries_one_hash() {
    use std::hash::BuildHasher;

    use super::super::key::KeyHashed;

    let hash = |value: &[u8], scope: &[u8]| KeyHashed.hash_one(Key::new(value, scope).unwrap());
    assert_eq!(hash(b"abc-123", b"one"), hash(b"\"abc-123\"", b"one"));
    assert_ne!(hash(b"abc-123", b"one"), hash(b"abc-123", b"two"));
    assert_ne!(hash(b"abc-123", b"one"), hash(b"abc-124", b"one"));
}

/// The fingerprint as first written, over `serde_json::Value`: the oracle the borrowed parse
/// must agree with on every body, or records already stored would stop matching.
mod oracle {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::super::super::fingerprint::Hash128;
    use super::*;

    fn reference(target: &str, body: &[u8], hashing: Hashing) -> Option<u128> {
        let mut value: Value = serde_json::from_slice(body).ok()?;
        match &mut value {
            Value::Array(batch) => batch.iter_mut().for_each(strip),
            one => strip(one),
        }
        let mut h = Hash128::new(hashing);
        h.bytes(b"strata-idem-fp/1");
        h.string(target);
        canonical(&value, &mut h);
        Some(h.finish())
    }

    fn strip(message: &mut Value) {
        let Value::Object(m) = message else { return };
        if let Some(id) = m.get_mut("id") {
            *id = Value::Bool(true);
        }
        if let Some(Value::Object(params)) = m.get_mut("params") {
            params.remove("_meta");
        }
    }

    fn canonical(v: &Value, h: &mut Hash128) {
        match v {
            Value::Null => h.bytes(b"n"),
            Value::Bool(true) => h.bytes(b"t"),
            Value::Bool(false) => h.bytes(b"f"),
            Value::Number(n) => {
                h.bytes(b"#");
                h.string(&n.to_string());
            }
            Value::String(s) => {
                h.bytes(b"\"");
                h.string(s);
            }
            Value::Array(items) => {
                h.bytes(b"[");
                h.len(items.len());
                items.iter().for_each(|item| canonical(item, h));
            }
            Value::Object(map) => {
                h.bytes(b"{");
                h.len(map.len());
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                for (k, v) in entries {
                    h.string(k);
                    canonical(v, h);
                }
            }
        }
    }

    /// JSON text, not values: repeated keys, escapes and every number form reach the parser.
    fn text() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("false".to_owned()),
            "-?(0|[1-9][0-9]{0,22})(\\.[0-9]{1,4})?([eE][+-]?[0-9]{1,3})?",
            "\"([a-z_ ]|\\\\[\"\\\\/bfnrt]|\\\\u00[0-7][0-9a-f]|\u{e9})*\"",
        ];
        leaf.prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                object(inner),
            ]
        })
    }

    /// An object whose keys repeat often and include the ones the fingerprint treats apart,
    /// also spelled with escapes.
    fn object(value: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
        let key = "\"(id|params|_meta|[a-z]|\\\\u0069d|_\\\\u006deta)\"";
        prop::collection::vec((key, value), 0..6).prop_map(|m| {
            let members: Vec<String> = m.iter().map(|(k, v)| format!("{k}:{v}")).collect();
            format!("{{ {} }}", members.join(" , "))
        })
    }

    proptest! {
        #[test]
        fn the_borrowed_parse_hashes_as_the_value_did(
            body in object(text()),
            batch: bool,
            shared: bool,
        ) {
            let body = if batch { format!("[{body},{body}]") } else { body };
            let hashing = if shared { Hashing::Shared } else { Hashing::InProcess };
            let want = reference("/mcp", body.as_bytes(), hashing);
            let got = fingerprint("/mcp", body.as_bytes(), hashing).map(|f| f.fingerprint.0);
            // A number out of f64's range is not JSON to either; every other body hashes.
            prop_assert_eq!(want, got, "{}", body);
        }
    }

    #[test]
    fn repeated_keys_keep_the_last_value_as_the_value_did() {
        for body in [
            r#"{"id":1,"params":{"a":1,"a":2},"params":{"_meta":1,"b":[1,2]}}"#,
            r#"{"id":1,"id":2,"method":"m","params":{"_meta":1,"_m\u0065ta":2}}"#,
            r#"{"params":{"n":1e300,"m":-0,"k":1.0,"j":18446744073709551616}}"#,
            r#"{"params":{"é":"\ud83d\ude00","\u00e9":"x"}}"#,
        ] {
            for hashing in BOTH {
                let got = fingerprint("/mcp", body.as_bytes(), hashing).map(|f| f.fingerprint.0);
                assert_eq!(got, reference("/mcp", body.as_bytes(), hashing), "{body}");
                assert!(got.is_some(), "{body}");
            }
        }
    }
}

/// The text path takes the body agents send and gives what the tree gives: the same
/// fingerprint and the same ids.
mod text_path {
    use proptest::prelude::*;

    use super::super::super::fingerprint::{by_tree, from_text};
    use super::{BOTH, Hashing};

    /// Values of the text path's kind: integers as `serde_json` prints them, strings without
    /// escapes (some not ASCII), nested objects and arrays.
    fn value() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("false".to_owned()),
            "0|-?[1-9][0-9]{0,17}",
            "\"([a-z_ /:.]|\u{e9}|\u{65e5})*\"",
        ];
        leaf.prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5)
                    .prop_map(|v| format!("[ {} ]", v.join(" ,"))),
                object(inner),
            ]
        })
    }

    /// An object with distinct keys, among them the ones the fingerprint treats apart, its
    /// members in an order of their own, so that sorting them is exercised.
    fn object(value: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
        prop::collection::btree_map("id|params|_meta|method|[a-z\u{e9}]{1,3}", value, 0..6)
            .prop_map(|m| m.into_iter().collect::<Vec<_>>())
            .prop_shuffle()
            .prop_map(|m| {
                let members: Vec<String> = m.iter().map(|(k, v)| format!("\"{k}\" :{v}")).collect();
                format!("{{\n{}}}", members.join(","))
            })
    }

    proptest! {
        #[test]
        fn takes_the_usual_body_and_hashes_it_as_the_tree(body in object(value()), shared: bool) {
            let hashing = if shared { Hashing::Shared } else { Hashing::InProcess };
            let got = from_text("/mcp", body.as_bytes(), hashing);
            prop_assert!(got.is_some(), "the text path gave up on {}", body);
            prop_assert_eq!(got, by_tree("/mcp", body.as_bytes(), hashing), "{}", body);
        }
    }

    /// Strings are read 16 bytes a compare: what stops one past its first 16 bytes (a byte
    /// above ASCII, an escape, a control character, the end of the body) is found as within them.
    #[test]
    fn reads_strings_past_their_first_sixteen_bytes() {
        let pad = "p".repeat(19);
        let text = format!(r#"{{"params":{{"{pad}é{pad}":"{pad}日{pad}"}}}}"#);
        for hashing in BOTH {
            let got = from_text("/mcp", text.as_bytes(), hashing);
            assert!(got.is_some(), "{text}");
            assert_eq!(got, by_tree("/mcp", text.as_bytes(), hashing), "{text}");
            let escape = format!(r#"{{"params":{{"a":"{pad}\n"}}}}"#);
            assert_eq!(from_text("/mcp", escape.as_bytes(), hashing), None);
            assert!(by_tree("/mcp", escape.as_bytes(), hashing).is_some());
            let control = format!("{{\"params\":{{\"a\":\"{pad}\u{1}\"}}}}");
            assert_eq!(
                super::fingerprint("/mcp", control.as_bytes(), hashing),
                None
            );
            let open = format!(r#"{{"params":{{"a":"{pad}{pad}"#);
            assert_eq!(super::fingerprint("/mcp", open.as_bytes(), hashing), None);
        }
    }

    /// What the text path leaves to the tree, JSON or not; `fingerprint` then answers as the
    /// tree does.
    #[test]
    fn leaves_the_rest_to_the_tree() {
        let json = [
            r#"[{"id":1,"method":"ping"}]"#,
            r#"{"id":"a\"b","method":"ping"}"#,
            r#"{"params":{"n":1.5}}"#,
            r#"{"params":{"n":1e3}}"#,
            r#"{"params":{"n":-0}}"#,
            r#"{"params":{"n":1234567890123456789}}"#,
            r#"{"id":1,"id":2}"#,
            r#"{"a":[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}"#,
        ];
        for (body, hashing) in json.iter().flat_map(|b| BOTH.map(|h| (b, h))) {
            assert_eq!(from_text("/mcp", body.as_bytes(), hashing), None, "{body}");
            let tree = by_tree("/mcp", body.as_bytes(), hashing);
            assert!(tree.is_some(), "{body}");
            let any = super::fingerprint("/mcp", body.as_bytes(), hashing);
            assert_eq!(any, tree, "{body}");
        }
        // Not JSON, or not a message.
        let not_json = [
            "\"a string\"",
            r#"{"a":01}"#,
            r#"{"a":1,}"#,
            "{\"a\":\"x\u{1}\"}",
            r#"{"a":tru}"#,
            r#"{"a":1}x"#,
            r#"{"a" 1}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":-}"#,
            r#"{"a":1"#,
            r#"{a:1}"#,
        ];
        for (body, hashing) in not_json.iter().flat_map(|b| BOTH.map(|h| (b, h))) {
            assert_eq!(from_text("/mcp", body.as_bytes(), hashing), None, "{body}");
            let any = super::fingerprint("/mcp", body.as_bytes(), hashing);
            assert_eq!(any, None, "{body}");
        }
        for hashing in BOTH {
            assert_eq!(from_text("/mcp", b"{\"a\":\"\xff\"}", hashing), None);
        }
    }
}

/// Writes gathered into runs hash as the bytes written one at a time: FNV-1a over each byte,
/// SipHash over the whole stream — across a run's end, and for a write longer than a run.
#[test]
fn gathered_runs_hash_as_the_stream() {
    use super::super::fingerprint::Hash128;
    let stream = test_stream();
    for sizes in [&[1usize, 8, 3][..], &[511, 2, 600], &[1300], &[512, 512, 1]] {
        let mut h = Hash128::new(Hashing::Shared);
        let (mut at, mut fnv) = (0, 0xcbf2_9ce4_8422_2325_u64);
        let mut sip = SipHasher24::new(SIP_KEY.0, SIP_KEY.1);
        for &n in sizes.iter().cycle().take(40) {
            let piece = &stream[at..(at + n).min(stream.len())];
            h.bytes(piece);
            for &b in piece {
                fnv = (fnv ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
                sip.write(&[b]);
            }
            at = (at + n).min(stream.len());
        }
        let want = (u128::from(fnv) << 64) | u128::from(sip.finish());
        assert_eq!(h.finish(), want, "writes of {sizes:?}");
    }
}

/// In-process fingerprints are XXH3-128 of the whole stream, whether it ends within the first
/// run (hashed at once) or goes on past it (hashed as it streams), at any cuts.
#[test]
fn in_process_hash_is_xxh3_of_the_stream() {
    use xxhash_rust::xxh3::xxh3_128;

    use super::super::fingerprint::Hash128;
    let stream = test_stream();
    for len in [0, 1, 17, 200, 256, 511, 512, 513, 1000, 2000] {
        for sizes in [&[1usize, 8, 3][..], &[511, 2, 600], &[1300], &[512, 512, 1]] {
            let mut h = Hash128::new(Hashing::InProcess);
            let mut at = 0;
            for &n in sizes.iter().cycle() {
                if at == len {
                    break;
                }
                let end = (at + n).min(len);
                h.bytes(&stream[at..end]);
                at = end;
            }
            let want = xxh3_128(&stream[..len]);
            assert_eq!(h.finish(), want, "{len} bytes in writes of {sizes:?}");
        }
    }
}

/// 2,000 bytes of no pattern a hash could shortcut.
fn test_stream() -> Vec<u8> {
    (0..2000u32)
        .map(|i| (i.wrapping_mul(131) >> 3) as u8)
        .collect()
}
