//! The writer against serde_json: the same bytes for every shape, string and size, the same
//! errors for what serde_json refuses.

use std::collections::BTreeMap;

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, SerializeStruct, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::escape::{first_escape_in_word, write_str};
use super::{to_vec, write};

/// Asserts the writer and serde_json agree on `value`: the same bytes, or both refuse it with
/// the same message.
#[track_caller]
fn same<T: ?Sized + Serialize>(value: &T) {
    let ours = to_vec(value).map_err(|e| e.to_string());
    let theirs = serde_json::to_vec(value).map_err(|e| e.to_string());
    match (&ours, &theirs) {
        (Ok(a), Ok(b)) => assert_eq!(
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(b),
            "bytes differ"
        ),
        _ => assert_eq!(ours, theirs),
    }
}

/// A small deterministic generator (xorshift), so the random cases repeat.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Text mixing what needs escapes, plain ASCII, and 2-, 3- and 4-byte characters.
    fn text(&mut self, max: u64) -> String {
        const PIECES: &[&str] = &[
            "a",
            "Z",
            "0",
            " ",
            "\"",
            "\\",
            "/",
            "\n",
            "\r",
            "\t",
            "\u{8}",
            "\u{c}",
            "\u{0}",
            "\u{1f}",
            "\u{7f}",
            "é",
            "€",
            "😀",
            "\u{2028}",
            "\u{feff}",
            "tool_call_id",
            "{}",
        ];
        let len = self.below(max + 1);
        (0..len)
            .map(|_| PIECES[self.below(PIECES.len() as u64) as usize])
            .collect()
    }
    fn value(&mut self, depth: u32) -> Value {
        let kinds = if depth == 0 { 5 } else { 7 };
        match self.below(kinds) {
            0 => Value::Null,
            1 => Value::Bool(self.below(2) == 0),
            2 => match self.below(3) {
                0 => json!(self.next() as i64),
                1 => json!(self.next()),
                _ => json!(f64::from_bits(self.next()) % 1e12),
            },
            3 | 4 => Value::String(self.text(24)),
            5 => Value::Array((0..self.below(5)).map(|_| self.value(depth - 1)).collect()),
            _ => Value::Object(
                (0..self.below(5))
                    .map(|_| (self.text(8), self.value(depth - 1)))
                    .collect(),
            ),
        }
    }
}

fn needs_escape(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

#[test]
fn a_word_finds_exactly_its_first_byte_that_needs_an_escape() {
    // Every byte at every position, on clean backgrounds that sit at the edges of the ranges
    // (just above the control characters, DEL, continuation and lead bytes of UTF-8).
    for background in [b'a', b' ', b'!', b'#', b']', 0x7f, 0x80, 0xbf, 0xe2, 0xff] {
        for position in 0..8 {
            for byte in 0..=255u8 {
                let mut word = [background; 8];
                word[position] = byte;
                let expected = needs_escape(byte).then_some(position);
                assert_eq!(
                    first_escape_in_word(&word),
                    expected,
                    "byte {byte:#04x} at {position} on {background:#04x}"
                );
                // After an escape, any byte (a borrow could flag the next one falsely): the
                // first is still the one found.
                if needs_escape(byte) && position < 7 {
                    for next in 0..=255u8 {
                        word[position + 1] = next;
                        assert_eq!(first_escape_in_word(&word), Some(position));
                    }
                }
            }
        }
    }
    // Negative: no clean word is ever flagged, whatever its bytes.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..200_000 {
        let mut word = rng.next().to_ne_bytes();
        for b in &mut word {
            if needs_escape(*b) {
                *b = b'x';
            }
        }
        assert_eq!(first_escape_in_word(&word), None, "{word:?}");
    }
}

#[test]
fn strings_are_escaped_as_serde_json_escapes_them() {
    // Every ASCII byte and a spread of characters, alone and at every offset of a word.
    let mut chars: Vec<char> = (0u8..=127).map(char::from).collect();
    chars.extend(['é', '€', '😀', '\u{2028}', '\u{fffd}', '\u{10ffff}']);
    for c in chars {
        for before in 0..17 {
            let text = format!("{}{c}{}", "x".repeat(before), "y".repeat(16 - before));
            let mut ours = Vec::new();
            write_str(&mut ours, &text);
            assert_eq!(ours, serde_json::to_vec(&text).unwrap(), "{text:?}");
        }
    }
    // Strings shorter than a word, of whole words, with a tail read as an overlapping last word,
    // and either side of where a string counts as long: the character at every place, alone
    // and followed by a second one.
    for c in ['"', '\\', '\n', '\u{1}', '\u{1f}', 'a', 'é'] {
        for len in (1..=25).chain(60..=70) {
            for at in 0..len {
                let text: String = (0..len).map(|i| if i == at { c } else { 'x' }).collect();
                same(&text);
                let twice: String = (0..len)
                    .map(|i| if i == at || i == len - 1 { c } else { 'x' })
                    .collect();
                same(&twice);
            }
        }
    }
    same("");
    same(&'"');
    same(&'\u{1}');
    same(&'😀');
    // Negative: what serde_json leaves alone stays as it is.
    assert_eq!(to_vec("a/b\u{7f}é").unwrap(), "\"a/b\u{7f}é\"".as_bytes());
}

#[test]
fn random_values_come_out_byte_for_byte() {
    let mut rng = Rng(42);
    for _ in 0..3_000 {
        same(&rng.value(4));
    }
}

#[test]
fn a_string_of_1_kib_and_of_1_mib_comes_out_the_same() {
    let mut rng = Rng(7);
    let mixed = rng.text(400);
    for size in [1 << 10, 1 << 20] {
        for text in [
            "a".repeat(size),
            "\"".repeat(size),
            "\u{1}".repeat(size),
            "é".repeat(size / 2),
            mixed.repeat(size / mixed.len().max(1) + 1),
        ] {
            same(&text);
            same(&json!({ "k": text, "list": [text] }));
        }
    }
}

/// Every shape serde's data model has, through a derived type.
#[derive(Serialize)]
struct Shapes {
    unit: (),
    unit_struct: UnitStruct,
    newtype: Newtype,
    tuple: (u8, i128, u128, f32, f64, char, bool),
    tuple_struct: TupleStruct,
    option_none: Option<u8>,
    option_some: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<u8>,
    #[serde(skip)]
    _never: u8,
    variants: Vec<Variant>,
    empty_vec: Vec<u8>,
    empty_map: BTreeMap<String, u8>,
    int_keys: BTreeMap<i64, u8>,
    bool_keys: BTreeMap<bool, u8>,
    char_keys: BTreeMap<char, u8>,
    variant_keys: BTreeMap<Key, u8>,
    newtype_keys: BTreeMap<NewtypeKey, u8>,
    #[serde(flatten)]
    flattened: Flattened,
    raw: Box<RawValue>,
    bytes: ByteSlice,
    floats: Vec<f64>,
}

#[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
struct UnitStruct;

#[derive(Serialize)]
struct Newtype(String);

#[derive(Serialize)]
struct TupleStruct(u8, String);

#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum Variant {
    Unit,
    Newtype(String),
    Tuple(u8, String),
    Struct { a: u8, b: Option<String> },
    Empty {},
}

#[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    First,
    Second,
}

#[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
struct NewtypeKey(u16);

#[derive(Serialize)]
struct Flattened {
    extra: String,
    #[serde(flatten)]
    more: BTreeMap<String, Value>,
}

struct ByteSlice(Vec<u8>);

impl Serialize for ByteSlice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

#[test]
fn every_shape_of_serdes_data_model_comes_out_byte_for_byte() {
    let shapes = Shapes {
        unit: (),
        unit_struct: UnitStruct,
        newtype: Newtype("n\"t".into()),
        tuple: (255, i128::MIN, u128::MAX, 1.5, -0.0, '\n', true),
        tuple_struct: TupleStruct(3, "t".into()),
        option_none: None,
        option_some: Some(None),
        skipped: None,
        _never: 9,
        variants: vec![
            Variant::Unit,
            Variant::Newtype("x".into()),
            Variant::Tuple(1, "y".into()),
            Variant::Struct {
                a: 2,
                b: Some("z".into()),
            },
            Variant::Empty {},
        ],
        empty_vec: vec![],
        empty_map: BTreeMap::new(),
        int_keys: [(-5, 1), (7, 2)].into(),
        bool_keys: [(true, 1), (false, 2)].into(),
        char_keys: [('"', 1), ('k', 2)].into(),
        variant_keys: [(Key::First, 1), (Key::Second, 2)].into(),
        newtype_keys: [(NewtypeKey(8), 1)].into(),
        flattened: Flattened {
            extra: "e".into(),
            more: [("m".to_string(), json!([1, {"n": null}]))].into(),
        },
        raw: RawValue::from_string(r#"{ "kept" : [1, 2] }"#.into()).unwrap(),
        bytes: ByteSlice(vec![0, 1, 255]),
        floats: vec![
            0.1,
            1e300,
            -1e-300,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::NAN,
            f64::INFINITY,
            3.0,
        ],
    };
    same(&shapes);
    // The message type the agent loop writes most.
    let mut message = crate::message::Message::assistant_with_tool_calls(
        "thinking \"aloud\"\n",
        vec![crate::message::ToolCall {
            id: "call_1".into(),
            name: "add".into(),
            args: json!({"a": 1, "b": [true, null]}),
        }],
    );
    message.metadata.insert("k".into(), json!("v"));
    same(&message);
    same(&vec![crate::message::Message::tool("call_1", "3")]);
}

/// A sequence and a map that announce no elements and then write some: serde_json closes them
/// at once, still put the commas in, and close them again at the end; so does the writer.
struct Misannounced;

impl Serialize for Misannounced {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(0))?;
        seq.serialize_element(&Inner)?;
        seq.serialize_element(&1)?;
        seq.end()
    }
}

struct Inner;

impl Serialize for Inner {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(0))?;
        map.serialize_entry("a", &1)?;
        map.end()
    }
}

#[test]
fn misannounced_lengths_come_out_as_serde_json_writes_them() {
    same(&Misannounced);
    let mut out = Vec::new();
    write(&mut out, &Misannounced).unwrap();
    assert_eq!(out, b"[],{},\"a\":1},1]");
}

#[test]
fn keys_serde_json_refuses_are_refused_with_its_words() {
    same(&BTreeMap::from([((1, 2), 0)]));
    same(&BTreeMap::from([(vec![1], 0)]));
    same(&BTreeMap::from([(Some(1), 0)]));
    same(&BTreeMap::from([((), 0)]));
    same(&BTreeMap::from([(UnitStruct, 0)]));
    let float_keys: Vec<(F, u8)> = vec![(F(1.5), 0), (F(f64::NAN), 1)];
    same(&PairsAsMap(&float_keys[..1]));
    same(&PairsAsMap(&float_keys));
    let err = to_vec(&BTreeMap::from([(vec![1], 0)])).unwrap_err();
    assert_eq!(err.to_string(), "key must be a string");
}

#[derive(Serialize)]
struct F(f64);

/// A map from pairs, so keys need no `Ord` (floats).
struct PairsAsMap<'a>(&'a [(F, u8)]);

impl Serialize for PairsAsMap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[test]
fn a_raw_value_is_written_as_it_is_and_only_its_text() {
    let raw = RawValue::from_string("[1,  \"two\"]".into()).unwrap();
    same(&raw);
    same(&json!({"outer": 1}));
    let mut map = Map::new();
    map.insert("raw".into(), json!(null));
    same(&map);
    // Negative: a struct that merely borrows the token's field name is not raw.
    struct LooksRaw;
    impl Serialize for LooksRaw {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut st = s.serialize_struct("LooksRaw", 1)?;
            st.serialize_field("$serde_json::private::RawValue", "{not raw")?;
            st.end()
        }
    }
    same(&LooksRaw);
}

#[test]
fn appending_keeps_what_the_buffer_held() {
    let mut out = b"[".to_vec();
    write(&mut out, &json!({"a": "b"})).unwrap();
    out.push(b',');
    write(&mut out, "c").unwrap();
    assert_eq!(out, br#"[{"a":"b"},"c""#);
}

#[test]
fn integers_of_every_width_come_out_as_serde_json_writes_them() {
    macro_rules! edges {
        ($($t:ty),*) => {$(
            for v in [<$t>::MIN, <$t>::MAX, 0 as $t, 1 as $t, 9 as $t, 10 as $t, 99 as $t] {
                same(&v);
                same(&[v, v]);
            }
        )*};
    }
    edges!(i8, i16, i32, i64, i128, u8, u16, u32, u64, u128);
    for v in [-1i64, -9, -10, -100, 1_000_000_007, i64::MIN + 1] {
        same(&v);
    }
    let mut rng = Rng(0x5eed);
    for _ in 0..10_000 {
        same(&(rng.next() as i64));
        same(&rng.next());
        same(&(rng.next() as u128 * rng.next() as u128));
    }
}

/// Counting objects and arrays: brackets in strings (escaped quotes included) do not count;
/// the count is exact at the bound; 1 KiB and 1 MiB of the same shape count the same per
/// repeat.
#[test]
fn containers_are_counted_outside_strings() {
    use super::containers_within;
    assert!(containers_within(br#"{"a":[1,2],"b":{}}"#, 3));
    assert!(!containers_within(br#"{"a":[1,2],"b":{}}"#, 2));
    // Not counted: brackets inside strings, after escaped quotes and escaped backslashes.
    let text = br#"{"s":"[{[{ \" [{ \\","t":"\\\"{["}"#;
    assert!(containers_within(text, 1));
    assert!(serde_json::from_slice::<Value>(text).is_ok());
    // Nothing at all, and a bare string.
    assert!(containers_within(b"", 0));
    assert!(containers_within(br#""[[[[""#, 0));
    for size in [1 << 10, 1 << 20] {
        let repeats = size / 8;
        let objects = format!("[{}{{\"a\":0}}]", "{\"a\":0},".repeat(repeats - 1));
        assert!(containers_within(objects.as_bytes(), repeats + 1), "{size}");
        assert!(!containers_within(objects.as_bytes(), repeats), "{size}");
        let text = format!("\"{}\"", "[{".repeat(size / 2));
        assert!(containers_within(text.as_bytes(), 0), "{size}");
    }
}
