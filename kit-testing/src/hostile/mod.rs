//! Hostile inputs for every parser kit runs on outside input, and a bounded fuzzer over them.
//!
//! [`Hostile`] is a seeded generator: each method returns one input as a peer, a model or a
//! damaged file could send it — valid samples mutated byte by byte, spliced, repeated,
//! truncated and sprinkled with the tokens parsers trip on (`\r`, `\u{d800}`, `1e400`, 30-digit
//! numbers, `{a,}` groups, `..`, ...). [`fuzz`] feeds one [`Target`] that many inputs, catches
//! panics, and reports the counts. The same seed gives the same inputs, so a failure can be
//! replayed; the benchmark's `fuzz` workload and the adversarial test suite both use it.
//!
//! ```
//! use kit_testing::hostile::{Target, fuzz};
//! let report = fuzz(Target::Sse, 200, 7);
//! assert_eq!((report.inputs, report.panics), (200, 0));
//! ```

mod seeds;
mod target;

pub use target::{Report, Target, fuzz};

use std::collections::BTreeMap;

use crate::mock::fixtures::Api;
use kit::checkpoint::{BlobKind, ChannelBlob};
use serde_json::{Value, json};

use seeds::{
    ANTHROPIC_JSON_SEEDS, ANTHROPIC_STREAM_SEEDS, BLOB_SEEDS, ERROR_SEEDS, OPENAI_JSON_SEEDS,
    OPENAI_STREAM_SEEDS, RUN_REQUEST_SEEDS, SSE_SEEDS, TOKENS,
};

/// A small, fast, seeded random source (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A source seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`0` when `n` is `0`).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// True one time in `n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The longest input a generator returns (bytes).
const MAX_INPUT: usize = 64 * 1024;

/// A seeded generator of hostile inputs (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct Hostile {
    rng: Rng,
}

impl Hostile {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Hostile {
            rng: Rng::new(seed),
        }
    }

    /// The random source.
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    /// `seed` mutated: bytes flipped, tokens inserted, ranges deleted, repeated or spliced.
    pub fn mutate(&mut self, seed: &[u8], others: &[&[u8]]) -> Vec<u8> {
        let mut out = seed.to_vec();
        let ops = 1 + self.rng.below(8);
        for _ in 0..ops {
            let at = self.rng.below(out.len() + 1);
            match self.rng.below(9) {
                0 if !out.is_empty() => {
                    let i = self.rng.below(out.len());
                    out[i] ^= 1 << self.rng.below(8);
                }
                1 | 2 => {
                    let token = self.rng.pick(TOKENS).as_bytes();
                    out.splice(at..at, token.iter().copied());
                }
                3 if !out.is_empty() => {
                    let end = (at + 1 + self.rng.below(32)).min(out.len());
                    out.drain(at.min(end)..end);
                }
                4 if !out.is_empty() => {
                    let start = self.rng.below(out.len());
                    let end = (start + 1 + self.rng.below(64)).min(out.len());
                    let piece = out[start..end].to_vec();
                    let most = if self.rng.one_in(16) { 512 } else { 4 };
                    let times = 1 + self.rng.below(most);
                    for _ in 0..times {
                        if out.len() + piece.len() > MAX_INPUT {
                            break;
                        }
                        out.splice(at..at, piece.iter().copied());
                    }
                }
                5 => out.truncate(at),
                6 => {
                    let n = self.rng.below(16);
                    let bytes: Vec<u8> = (0..n).map(|_| self.rng.next_u64() as u8).collect();
                    out.splice(at..at, bytes);
                }
                7 if !others.is_empty() => {
                    let other = *self.rng.pick(others);
                    let from = self.rng.below(other.len() + 1);
                    out.splice(at..at, other[from..].iter().copied());
                }
                _ => {
                    let byte = *self.rng.pick(b"{}[]\",:\\\n\r0a ");
                    out.insert(at, byte);
                }
            }
        }
        out.truncate(MAX_INPUT);
        out
    }

    fn seeded(&mut self, seeds: &[&'static str]) -> Vec<u8> {
        self.seeded_with(seeds, None)
    }

    /// Seeds, plus the recorded-shape fixtures of this API and form
    /// ([`crate::mock::fixtures`]).
    fn seeded_with(
        &mut self,
        seeds: &[&'static str],
        fixtures: Option<(crate::mock::fixtures::Api, bool)>,
    ) -> Vec<u8> {
        let mut seeds: Vec<&[u8]> = seeds.iter().map(|s| s.as_bytes()).collect();
        if let Some((api, stream)) = fixtures {
            seeds.extend(
                crate::mock::fixtures::all()
                    .filter(|f| f.api == api && f.stream == stream)
                    .map(|f| f.body.as_bytes()),
            );
        }
        if seeds.is_empty() {
            return Vec::new();
        }
        let seed = *self.rng.pick(&seeds);
        if self.rng.one_in(8) {
            return seed.to_vec();
        }
        self.mutate(seed, &seeds)
    }

    /// A `text/event-stream` body.
    pub fn sse(&mut self) -> Vec<u8> {
        self.seeded(SSE_SEEDS)
    }

    /// An OpenAI Chat Completions body (whole answer or error).
    pub fn openai_json(&mut self) -> Vec<u8> {
        self.seeded_with(OPENAI_JSON_SEEDS, Some((Api::ChatCompletions, false)))
    }

    /// An OpenAI Chat Completions event stream.
    pub fn openai_stream(&mut self) -> Vec<u8> {
        self.seeded_with(OPENAI_STREAM_SEEDS, Some((Api::ChatCompletions, true)))
    }

    /// An Anthropic Messages body (whole answer or error).
    pub fn anthropic_json(&mut self) -> Vec<u8> {
        self.seeded_with(ANTHROPIC_JSON_SEEDS, Some((Api::Messages, false)))
    }

    /// An Anthropic Messages event stream.
    pub fn anthropic_stream(&mut self) -> Vec<u8> {
        self.seeded_with(ANTHROPIC_STREAM_SEEDS, Some((Api::Messages, true)))
    }

    /// An OpenAI Responses API body (whole answer or error).
    pub fn responses_json(&mut self) -> Vec<u8> {
        self.seeded_with(&[], Some((Api::Responses, false)))
    }

    /// An OpenAI Responses API event stream.
    pub fn responses_stream(&mut self) -> Vec<u8> {
        self.seeded_with(&[], Some((Api::Responses, true)))
    }

    /// A provider's error body.
    pub fn error_body(&mut self) -> Vec<u8> {
        self.seeded(ERROR_SEEDS)
    }

    /// A `POST /runs` body for a worker.
    pub fn run_request(&mut self) -> Vec<u8> {
        self.seeded(RUN_REQUEST_SEEDS)
    }

    /// A task id as a worker might return it.
    pub fn task_id(&mut self) -> String {
        const PARTS: &[&str] = &[
            "run-", "a", "7", "/", "\\", ".", "..", "%", "%2F", "?", "#", " ", "é", "\0", "~",
            "admin", "%2e%2e", "\u{202e}", "+", "&",
        ];
        let n = self.rng.below(12);
        (0..n).map(|_| *self.rng.pick(PARTS)).collect()
    }

    /// A JSON value of random shape, nested up to `depth`.
    pub fn json_value(&mut self, depth: usize) -> Value {
        match self.rng.below(if depth == 0 { 5 } else { 8 }) {
            0 => Value::Null,
            1 => json!(self.rng.one_in(2)),
            2 => match self.rng.below(5) {
                0 => json!(u64::MAX),
                1 => json!(i64::MIN),
                2 => json!(f64::MAX),
                3 => json!(1.5),
                _ => json!(self.rng.below(100)),
            },
            3 | 4 => {
                let s: String = (0..self.rng.below(8))
                    .map(|_| {
                        *self
                            .rng
                            .pick(&["a", "add", "num", "é", "\"", "\\", "\u{0}"])
                    })
                    .collect();
                json!(s)
            }
            5 => Value::Array(
                (0..self.rng.below(4))
                    .map(|_| self.json_value(depth - 1))
                    .collect(),
            ),
            _ => {
                let mut map = serde_json::Map::new();
                for _ in 0..self.rng.below(4) {
                    let key = (*self.rng.pick(&[
                        "op", "left", "right", "value", "n", "todos", "content", "status", "x",
                    ]))
                    .to_string();
                    map.insert(key, self.json_value(depth - 1));
                }
                Value::Object(map)
            }
        }
    }

    /// A tool schema and arguments for it: valid arguments mutated, or random JSON.
    pub fn tool_args(&mut self) -> (Value, Value) {
        let schemas = tool_schemas();
        let schema = self.rng.pick(&schemas).clone();
        let args = if self.rng.one_in(2) {
            let depth = self.rng.below(16);
            nested_expr(depth)
        } else {
            self.json_value(6)
        };
        let args = if self.rng.one_in(3) {
            let text = args.to_string();
            let bytes = self.mutate(text.as_bytes(), &[]);
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        } else {
            args
        };
        (schema, args)
    }

    /// A `glob` pattern.
    pub fn glob_pattern(&mut self) -> String {
        if self.rng.one_in(200) {
            return "{a,}".repeat(1 + self.rng.below(3000));
        }
        const PARTS: &[&str] = &[
            "{", "}", ",", "*", "**", "?", "[", "]", "!", "^", "\\", "/", "a", "b", ".", "-", "é",
            "{a,b}", "[a-z]", "**/", "*.rs", "[!.]", "[]", "[-]", "\\{",
        ];
        let n = self.rng.below(40);
        (0..n).map(|_| *self.rng.pick(PARTS)).collect()
    }

    /// A path to match a pattern against.
    pub fn path(&mut self) -> String {
        const PARTS: &[&str] = &[
            "a", "b", ".git", "src", "x.rs", "é", "{", "[", "*", "..", ".",
        ];
        let n = 1 + self.rng.below(6);
        let mut path = String::new();
        for _ in 0..n {
            path.push('/');
            path.push_str(self.rng.pick::<&str>(PARTS));
        }
        path
    }

    /// A `grep` pattern and whether it is a regular expression.
    pub fn grep_pattern(&mut self) -> (String, bool) {
        const PARTS: &[&str] = &[
            "(", ")", "*", "+", "?", "{1000}", "{2,}", "[", "]", "\\", "|", "^", "$", "a", ".",
            "\\b", "(?i)", "\\p{L}", "(a*)*", "[^", "\\d", "é", "{",
        ];
        let n = 1 + self.rng.below(16);
        let pattern: String = (0..n).map(|_| *self.rng.pick(PARTS)).collect();
        (pattern, self.rng.one_in(2))
    }

    /// Text to search.
    pub fn text(&mut self) -> String {
        let seed = b"fn main() {\n    let a = 1;\n}\r\n\xc3\xa9\n\n".as_slice();
        String::from_utf8_lossy(&self.mutate(seed, &[])).into_owned()
    }

    /// A `Retry-After` (or `retry-after-ms`) header value.
    pub fn retry_after(&mut self) -> String {
        const SEEDS: &[&str] = &[
            "3",
            "0.5",
            "1e300",
            "-1",
            "NaN",
            "inf",
            "999999999999999999999999999999",
            "18446744073709551616",
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "Fri, 31 Dec 9999 23:59:59 GMT",
            " 7 ",
            "",
        ];
        let bytes = self.seeded(SEEDS);
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Channel versions and blobs as a damaged store might hold them: chains that loop, skip,
    /// end nowhere or carry garbage.
    pub fn checkpoint_chains(&mut self) -> (BTreeMap<String, String>, Vec<ChannelBlob>) {
        let channels = ["messages", "files", "todos"];
        let mut versions = BTreeMap::new();
        let mut blobs = Vec::new();
        for channel in channels.iter().take(1 + self.rng.below(3)) {
            let n = 1 + self.rng.below(8);
            for v in 0..n {
                let prev = match self.rng.below(6) {
                    0 => None,
                    1 => Some(format!("v{}", self.rng.below(n + 2))),
                    2 => Some(format!("v{v}")),
                    _ => v.checked_sub(1).map(|p| format!("v{p}")),
                };
                blobs.push(ChannelBlob {
                    channel: channel.to_string(),
                    version: format!("v{v}"),
                    prev_version: prev,
                    kind: if self.rng.one_in(3) {
                        BlobKind::Full
                    } else {
                        BlobKind::Delta
                    },
                    data: self.blob(),
                });
            }
            versions.insert(channel.to_string(), format!("v{}", self.rng.below(n + 1)));
        }
        (versions, blobs)
    }

    /// The bytes of a channel blob read back from a damaged file.
    pub fn blob(&mut self) -> Vec<u8> {
        self.seeded(BLOB_SEEDS)
    }
}

/// An `{"op": "add", "left": .., "right": ..}` expression nested `depth` deep: what a
/// recursive tagged enum's arguments look like.
pub fn nested_expr(depth: usize) -> Value {
    let mut v = json!({"op": "num", "value": 1});
    for _ in 0..depth {
        v = json!({"op": "add", "left": v, "right": {"op": "num", "value": 2}});
    }
    v
}

/// The schema of a recursive tagged enum (`enum Expr { Num { value }, Add { left, right },
/// Mul { left, right }, Neg { inner } }`) as schemars writes it: `oneOf` over `$ref`s.
pub fn recursive_enum_schema() -> Value {
    let binary = |tag: &str| {
        json!({
            "type": "object",
            "properties": {
                "op": {"type": "string", "const": tag},
                "left": {"$ref": "#/$defs/Expr"},
                "right": {"$ref": "#/$defs/Expr"}
            },
            "required": ["op", "left", "right"]
        })
    };
    json!({
        "$ref": "#/$defs/Expr",
        "$defs": {"Expr": {"oneOf": [
            {"type": "object", "properties": {"op": {"type": "string", "const": "num"}, "value": {"type": "integer"}}, "required": ["op", "value"]},
            binary("add"),
            binary("mul"),
            binary("sub"),
            {"type": "object", "properties": {"op": {"type": "string", "const": "neg"}, "inner": {"$ref": "#/$defs/Expr"}}, "required": ["op", "inner"]}
        ]}}
    })
}

fn tool_schemas() -> Vec<Value> {
    vec![
        recursive_enum_schema(),
        json!({"type": "object", "properties": {
            "todos": {"type": "array", "items": {"$ref": "#/$defs/Todo"}, "maxItems": 3},
            "n": {"type": "integer", "minimum": 1, "maximum": 10}
        }, "required": ["todos"], "additionalProperties": false,
        "$defs": {"Todo": {"type": "object", "properties": {
            "content": {"type": "string", "maxLength": 5},
            "status": {"enum": ["pending", "done"]}
        }, "required": ["content"]}}}),
        json!({"anyOf": [{"$ref": "#"}, {"type": "null"}], "allOf": [{"$ref": "#/nope"}]}),
        json!({"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}}),
        json!(false),
    ]
}
