//! Checking a model's tool arguments against the tool's JSON Schema.
//!
//! Covers what tool schemas use in practice (and what `schemars` emits): `type` (also lists of
//! types), `properties`, `required`, `additionalProperties`, `enum`, `const`, `items`,
//! `anyOf` / `oneOf` / `allOf`, `$ref` into `$defs` / `definitions`, `minimum` / `maximum`,
//! `minLength` / `maxLength`, `minItems` / `maxItems`, and `nullable`. Unknown keywords are
//! ignored. Messages name the path of the offending value, so the model can fix its call.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::text::listing;

/// Checks `args` against `schema`; on failure returns the problems found: the first 100, then
/// how many more there are. A problem quotes at most 60 characters of a value and names at
/// most 20 allowed values or accepted keys, however large the arguments or the schema.
///
/// ```
/// use serde_json::json;
/// let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
/// assert!(kit::tool::validate_args(&schema, &json!({"n": 3})).is_ok());
/// let problems = kit::tool::validate_args(&schema, &json!({"n": "3"})).unwrap_err();
/// assert_eq!(problems, ["`n`: expected integer, got string \"3\""]);
/// ```
///
/// Time is linear in the size of `args` for a given schema: whether a value matches a
/// sub-schema is worked out once and remembered, so `anyOf` / `oneOf` over recursive
/// definitions (a tagged enum nested in itself) never re-checks a subtree; and a hard budget
/// of a million steps (each value checked, each `enum` option compared) ends any check that
/// would still run away (reported as a problem). The check recurses at most 128 levels into
/// the value and 512 references or branches along the way, so no schema exhausts a stack.
///
/// A [`Tool`](crate::tool::Tool) compiles its schema once and checks valid calls without
/// reading the schema again; what that finds wrong is named by this function.
pub fn validate_args(schema: &Value, args: &Value) -> Result<(), Vec<String>> {
    let mut problems = Problems::listing(MAX_PROBLEMS);
    let mut ctx = Ctx {
        memo: HashMap::new(),
        steps: 0,
    };
    check(
        schema,
        schema,
        args,
        Path::Root,
        &mut problems,
        Depth::default(),
        &mut ctx,
    );
    if ctx.steps > MAX_STEPS {
        problems.add(|| {
            format!(
                "the arguments are too large or too deeply nested to check (more than \
                 {MAX_STEPS} steps); send smaller arguments"
            )
        });
    }
    problems.into_result()
}

/// The problems found: the first few written out, the rest only counted, so a call with a
/// million wrong values costs a million checks but only a few messages.
struct Problems {
    listed: Vec<String>,
    more: usize,
    limit: usize,
}

impl Problems {
    /// Problems of which the first `limit` are written out.
    fn listing(limit: usize) -> Problems {
        Problems {
            listed: Vec::new(),
            more: 0,
            limit,
        }
    }

    /// One more problem, written out by `text` if it is among the first.
    fn add(&mut self, text: impl FnOnce() -> String) {
        if self.listed.len() < self.limit {
            self.listed.push(text());
        } else {
            self.more += 1;
        }
    }

    fn is_empty(&self) -> bool {
        self.listed.is_empty() && self.more == 0
    }

    fn into_result(mut self) -> Result<(), Vec<String>> {
        if self.is_empty() {
            return Ok(());
        }
        if self.more > 0 {
            self.listed
                .push(format!("… and {} more problems", self.more));
        }
        Err(self.listed)
    }
}

/// The deepest value checked (serde_json parses no deeper either); a deeper one is a problem.
pub(super) const MAX_DEPTH: usize = 128;

/// The most `$ref`s (and `anyOf` / `oneOf` / `allOf` branches) followed without descending into
/// the value: a schema referring to itself in a loop cannot be checked, and is not.
const MAX_REF_CHAIN: usize = 32;

/// The most `$ref`s (and branches) followed on the whole way from the root to one check. With
/// [`MAX_DEPTH`] it bounds how deep the check recurses, so no schema a peer sends can exhaust
/// a thread's stack (32 references at each of 128 levels would be thousands of frames). A
/// recursive tagged enum takes two per level (its `$ref` and its `oneOf`): 256 levels' worth.
pub(super) const MAX_PATH_REFS: usize = 512;

/// How deep a check is: in the value, in references followed since the last step into it, and
/// in references followed since the root.
#[derive(Debug, Clone, Copy, Default)]
struct Depth {
    value: usize,
    refs: usize,
    path_refs: usize,
}

impl Depth {
    /// One level into the value.
    fn into_value(self) -> Depth {
        Depth {
            value: self.value + 1,
            refs: 0,
            path_refs: self.path_refs,
        }
    }

    /// One more reference (or branch) for the same value.
    fn through_ref(self) -> Depth {
        Depth {
            value: self.value,
            refs: self.refs + 1,
            path_refs: self.path_refs + 1,
        }
    }
}

/// The most schema-and-value steps one validation takes.
pub(super) const MAX_STEPS: usize = 1_000_000;

/// The most problems listed (the model needs the first ones to fix its call).
const MAX_PROBLEMS: usize = 100;

/// What a validation remembers: whether a (sub-schema, value) pair matched, by address, and
/// the steps taken.
struct Ctx {
    memo: HashMap<(usize, usize), bool>,
    steps: usize,
}

impl Ctx {
    /// True when `value` matches `schema`, worked out at most once per pair.
    fn matches(&mut self, root: &Value, schema: &Value, value: &Value, depth: Depth) -> bool {
        let key = (
            std::ptr::from_ref(schema) as usize,
            std::ptr::from_ref(value) as usize,
        );
        if let Some(&known) = self.memo.get(&key) {
            return known;
        }
        // Only whether there is a problem matters: none is written out.
        let mut sub = Problems::listing(0);
        check(root, schema, value, Path::Root, &mut sub, depth, self);
        let ok = sub.is_empty();
        self.memo.insert(key, ok);
        ok
    }
}

/// The keywords of one schema object that the checks read, found in one pass over its keys:
/// a schema object has a handful of keys, and looking each keyword up would search them a
/// dozen times for every value checked.
#[derive(Default)]
struct Keywords<'a> {
    reference: Option<&'a Value>,
    nullable: Option<&'a Value>,
    types: Option<&'a Value>,
    enumeration: Option<&'a Value>,
    constant: Option<&'a Value>,
    any_of: Option<&'a Value>,
    one_of: Option<&'a Value>,
    all_of: Option<&'a Value>,
    properties: Option<&'a Value>,
    required: Option<&'a Value>,
    additional: Option<&'a Value>,
    items: Option<&'a Value>,
    min_items: Option<&'a Value>,
    max_items: Option<&'a Value>,
    min_length: Option<&'a Value>,
    max_length: Option<&'a Value>,
    minimum: Option<&'a Value>,
    maximum: Option<&'a Value>,
}

impl<'a> Keywords<'a> {
    fn of(schema: &'a Map<String, Value>) -> Keywords<'a> {
        let mut k = Keywords::default();
        for (key, value) in schema {
            let slot = match key.as_str() {
                "$ref" => &mut k.reference,
                "nullable" => &mut k.nullable,
                "type" => &mut k.types,
                "enum" => &mut k.enumeration,
                "const" => &mut k.constant,
                "anyOf" => &mut k.any_of,
                "oneOf" => &mut k.one_of,
                "allOf" => &mut k.all_of,
                "properties" => &mut k.properties,
                "required" => &mut k.required,
                "additionalProperties" => &mut k.additional,
                "items" => &mut k.items,
                "minItems" => &mut k.min_items,
                "maxItems" => &mut k.max_items,
                "minLength" => &mut k.min_length,
                "maxLength" => &mut k.max_length,
                "minimum" => &mut k.minimum,
                "maximum" => &mut k.maximum,
                _ => continue,
            };
            *slot = Some(value);
        }
        k
    }
}

/// Checks `value` against `schema`. This is the recursion (through references, branches and
/// the value's levels), so it keeps its own frame small: what builds problem texts or reads
/// the value's contents is in helpers, on the stack only while they run.
fn check(
    root: &Value,
    schema: &Value,
    value: &Value,
    path: Path<'_>,
    problems: &mut Problems,
    depth: Depth,
    ctx: &mut Ctx,
) {
    if depth.refs > MAX_REF_CHAIN {
        return;
    }
    if depth.path_refs > MAX_PATH_REFS || depth.value > MAX_DEPTH {
        problems.add(|| too_deep(path, depth));
        return;
    }
    ctx.steps += 1;
    if ctx.steps > MAX_STEPS {
        return;
    }
    let Value::Object(s) = schema else {
        // `true` / `false` schemas.
        if schema == &Value::Bool(false) {
            problems.add(|| nothing_allowed(path));
        }
        return;
    };
    let s = Keywords::of(s);
    if let Some(Value::String(reference)) = s.reference {
        // An unresolvable reference cannot be checked; the handler decides.
        if let Some(target) = resolve(root, reference) {
            check(
                root,
                target,
                value,
                path,
                problems,
                depth.through_ref(),
                ctx,
            );
        }
    }
    if value.is_null() && s.nullable == Some(&Value::Bool(true)) {
        return;
    }
    if !check_literals(&s, value, path, problems, ctx) {
        return;
    }
    check_branches(root, &s, value, path, problems, depth, ctx);
    check_contents(root, &s, value, path, problems, depth, ctx);
}

#[inline(never)]
fn too_deep(path: Path<'_>, depth: Depth) -> String {
    if depth.value > MAX_DEPTH {
        format!(
            "{}: nested more than {MAX_DEPTH} levels deep; send flatter arguments",
            at(path)
        )
    } else {
        format!(
            "{}: the tool's schema leads through more than {MAX_PATH_REFS} references to \
             here, too many to check; the tool's schema needs simplifying",
            at(path)
        )
    }
}

#[inline(never)]
fn nothing_allowed(path: Path<'_>) -> String {
    format!("{}: no value is allowed here", at(path))
}

/// `type`, `enum` and `const`; false when the type is wrong (nothing else is checked then).
#[inline(never)]
fn check_literals(
    s: &Keywords<'_>,
    value: &Value,
    path: Path<'_>,
    problems: &mut Problems,
    ctx: &mut Ctx,
) -> bool {
    if let Some(t) = s.types {
        let allowed = |t: &Value| match t {
            Value::String(t) => has_type(value, t),
            Value::Array(ts) => {
                let mut names = ts.iter().filter_map(Value::as_str).peekable();
                names.peek().is_none() || names.any(|t| has_type(value, t))
            }
            _ => true,
        };
        if !allowed(t) {
            problems.add(|| {
                let names: Vec<&str> = match t {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                    _ => Vec::new(),
                };
                format!(
                    "{}: expected {}, got {}",
                    at(path),
                    listing(names.iter().map(|t| clip(t)), names.len(), " or "),
                    describe(value)
                )
            });
            return false;
        }
    }
    if let Some(Value::Array(options)) = s.enumeration {
        // Each option compared is a step: a long list checked against many values is bounded
        // by the budget like any other work.
        ctx.steps += options.len();
        if !options.contains(value) {
            problems.add(|| {
                format!(
                    "{}: must be one of {}, got {}",
                    at(path),
                    listing(options.iter().map(clip_json), options.len(), ", "),
                    clip_json(value)
                )
            });
        }
    }
    if let Some(expected) = s.constant
        && expected != value
    {
        problems.add(|| {
            format!(
                "{}: must be {}, got {}",
                at(path),
                clip_json(expected),
                clip_json(value)
            )
        });
    }
    true
}

/// `anyOf`, `oneOf` and `allOf`.
#[inline(never)]
fn check_branches(
    root: &Value,
    s: &Keywords<'_>,
    value: &Value,
    path: Path<'_>,
    problems: &mut Problems,
    depth: Depth,
    ctx: &mut Ctx,
) {
    for (key, options) in [("anyOf", s.any_of), ("oneOf", s.one_of)] {
        if let Some(Value::Array(options)) = options {
            let matching = options
                .iter()
                .filter(|o| ctx.matches(root, o, value, depth.through_ref()))
                .count();
            let ok = if key == "oneOf" {
                matching == 1
            } else {
                matching >= 1
            };
            if !ok {
                problems.add(|| no_shape_matched(options, value, path));
            }
        }
    }
    if let Some(Value::Array(all)) = s.all_of {
        for sub in all {
            check(root, sub, value, path, problems, depth.through_ref(), ctx);
        }
    }
}

#[inline(never)]
fn no_shape_matched(options: &[Value], value: &Value, path: Path<'_>) -> String {
    // schemars writes documented enums as `oneOf` of `const`s: name the values.
    let consts = || options.iter().filter_map(|o| o.get("const"));
    if !options.is_empty() && consts().count() == options.len() {
        format!(
            "{}: must be one of {}, got {}",
            at(path),
            listing(consts().map(clip_json), options.len(), ", "),
            clip_json(value)
        )
    } else {
        format!(
            "{}: {} does not match any of the allowed shapes",
            at(path),
            describe(value)
        )
    }
}

/// What depends on the kind of value: an object's keys, an array's items, a string's length,
/// a number's range.
#[inline(never)]
fn check_contents(
    root: &Value,
    s: &Keywords<'_>,
    value: &Value,
    path: Path<'_>,
    problems: &mut Problems,
    depth: Depth,
    ctx: &mut Ctx,
) {
    match value {
        Value::Object(map) => check_object(root, s, map, path, problems, depth, ctx),
        Value::Array(items) => {
            if let Some(item_schema) = s.items {
                for (i, item) in items.iter().enumerate() {
                    check(
                        root,
                        item_schema,
                        item,
                        Path::Index(&path, i),
                        problems,
                        depth.into_value(),
                        ctx,
                    );
                }
            }
            bound(
                s.min_items,
                items.len(),
                path,
                "at least",
                "items",
                problems,
            );
            bound(s.max_items, items.len(), path, "at most", "items", problems);
        }
        Value::String(text) => {
            let n = text.chars().count();
            bound(s.min_length, n, path, "at least", "characters", problems);
            bound(s.max_length, n, path, "at most", "characters", problems);
        }
        Value::Number(n) => {
            if let (Some(min), Some(v)) = (s.minimum.and_then(Value::as_f64), n.as_f64())
                && v < min
            {
                problems.add(|| format!("{}: must be at least {min}, got {n}", at(path)));
            }
            if let (Some(max), Some(v)) = (s.maximum.and_then(Value::as_f64), n.as_f64())
                && v > max
            {
                problems.add(|| format!("{}: must be at most {max}, got {n}", at(path)));
            }
        }
        _ => {}
    }
}

fn check_object(
    root: &Value,
    s: &Keywords<'_>,
    map: &Map<String, Value>,
    path: Path<'_>,
    problems: &mut Problems,
    depth: Depth,
    ctx: &mut Ctx,
) {
    let properties = s.properties.and_then(Value::as_object);
    if let Some(Value::Array(required)) = s.required {
        for key in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(key) {
                problems.add(|| format!("{} is required", at(Path::Key(&path, key))));
            }
        }
    }
    for (key, value) in map {
        let child = Path::Key(&path, key);
        match properties.and_then(|p| p.get(key)) {
            Some(prop) => check(root, prop, value, child, problems, depth.into_value(), ctx),
            None => match s.additional {
                Some(Value::Bool(false)) => {
                    problems.add(|| {
                        let known = properties.map_or(0, Map::len);
                        format!(
                            "{} is not an accepted argument{}",
                            at(child),
                            if known == 0 {
                                String::new()
                            } else {
                                let names = properties.into_iter().flat_map(Map::keys);
                                format!(
                                    " (accepted: {})",
                                    listing(names.map(|k| clip(k)), known, ", ")
                                )
                            }
                        )
                    });
                }
                Some(extra @ Value::Object(_)) => {
                    check(root, extra, value, child, problems, depth.into_value(), ctx)
                }
                _ => {}
            },
        }
    }
}

fn bound(
    limit: Option<&Value>,
    actual: usize,
    path: Path<'_>,
    word: &str,
    unit: &str,
    problems: &mut Problems,
) {
    if let Some(limit) = limit.and_then(Value::as_u64) {
        let bad = if word == "at least" {
            (actual as u64) < limit
        } else {
            (actual as u64) > limit
        };
        if bad {
            problems.add(|| {
                format!(
                    "{}: must have {word} {limit} {unit}, has {actual}",
                    at(path)
                )
            });
        }
    }
}

pub(super) fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

fn has_type(value: &Value, t: &str) -> bool {
    match t {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64()
                || value.is_u64()
                || value
                    .as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f.is_finite())
        }
        _ => true,
    }
}

fn describe(value: &Value) -> String {
    let clipped = clip_json(value);
    let kind = match value {
        Value::Null => return "null".to_string(),
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    format!("{kind} {clipped}")
}

/// The most characters of a value (or a name) a problem quotes.
const QUOTED: usize = 60;

/// `text`, cut to [`QUOTED`] characters with a `…`.
fn clip(text: &str) -> String {
    crate::text::clip(text, QUOTED)
}

/// `value` as JSON, cut to [`QUOTED`] characters: only that much of it is written, however
/// large it is.
fn clip_json(value: &Value) -> String {
    /// Keeps the first bytes written and refuses the rest (serde_json then stops).
    struct Capped(Vec<u8>);
    impl std::io::Write for Capped {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            // Enough bytes for one character more than is quoted, whatever their widths.
            let room = (QUOTED + 1) * 4 - self.0.len();
            if room == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            let n = buf.len().min(room);
            self.0.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut out = Capped(Vec::new());
    // An error here only means the text was cut.
    let _ = serde_json::to_writer(&mut out, value);
    let text = match std::str::from_utf8(&out.0) {
        Ok(text) => text,
        // Cut inside a character: up to the last whole one.
        Err(e) => std::str::from_utf8(&out.0[..e.valid_up_to()]).unwrap_or_default(),
    };
    clip(text)
}

/// Where a value is in the arguments: written out only for a problem (a valid call builds no
/// path text at all).
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl std::fmt::Display for Path<'_> {
    /// `todos[0].status`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Key(Path::Root, key) => f.write_str(key),
            Path::Key(parent, key) => write!(f, "{parent}.{key}"),
            Path::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

fn at(path: Path<'_>) -> String {
    match path {
        Path::Root => "the arguments".to_string(),
        path => format!("`{path}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemars_style_schema_with_refs_and_options() {
        let schema = json!({
            "type": "object",
            "properties": {
                "todos": {"type": "array", "items": {"$ref": "#/$defs/Todo"}},
                "note": {"type": ["string", "null"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 10}
            },
            "required": ["todos"],
            "additionalProperties": false,
            "$defs": {"Todo": {
                "type": "object",
                "properties": {
                    "content": {"type": "string"},
                    "status": {"enum": ["pending", "in_progress", "completed"]}
                },
                "required": ["content", "status"]
            }}
        });
        assert!(
            validate_args(
                &schema,
                &json!({"todos": [{"content": "a", "status": "pending"}], "note": null})
            )
            .is_ok()
        );
        let errs = validate_args(
            &schema,
            &json!({"todos": [{"content": "a", "status": "done"}], "limit": 0, "prompt": "x"}),
        )
        .unwrap_err();
        assert!(
            errs.iter()
                .any(|e| e.contains("`todos[0].status`: must be one of")),
            "{errs:?}"
        );
        assert!(
            errs.iter()
                .any(|e| e.contains("`limit`: must be at least 1")),
            "{errs:?}"
        );
        assert!(
            errs.iter()
                .any(|e| e.contains("`prompt` is not an accepted argument")),
            "{errs:?}"
        );
    }

    /// `enum Expr { Num { value }, Add { left, right }, Neg { inner } }` as schemars writes it.
    fn expr_schema() -> Value {
        json!({
            "$ref": "#/$defs/Expr",
            "$defs": {"Expr": {"oneOf": [
                {"type": "object", "properties": {"op": {"type": "string", "const": "num"},
                    "value": {"type": "integer"}}, "required": ["op", "value"]},
                {"type": "object", "properties": {"op": {"type": "string", "const": "add"},
                    "left": {"$ref": "#/$defs/Expr"}, "right": {"$ref": "#/$defs/Expr"}},
                    "required": ["op", "left", "right"]},
                {"type": "object", "properties": {"op": {"type": "string", "const": "neg"},
                    "inner": {"$ref": "#/$defs/Expr"}}, "required": ["op", "inner"]}
            ]}}
        })
    }

    fn nested(depth: usize, leaf: &str) -> Value {
        let mut v = json!({"op": leaf, "value": 1});
        for _ in 0..depth {
            v = json!({"op": "add", "left": v, "right": {"op": "num", "value": 2}});
        }
        v
    }

    #[test]
    fn a_deep_recursive_tagged_enum_is_checked_in_linear_time() {
        let schema = expr_schema();
        assert_eq!(validate_args(&schema, &nested(0, "num")), Ok(()));
        assert_eq!(validate_args(&schema, &nested(1, "num")), Ok(()));
        // 14 levels took 56 s when every option re-checked every subtree; 100 is instant now.
        assert_eq!(validate_args(&schema, &nested(100, "num")), Ok(()));
        let problems = validate_args(&schema, &nested(100, "nope")).unwrap_err();
        assert!(
            problems[0].contains("does not match any of the allowed shapes"),
            "{problems:?}"
        );
    }

    #[test]
    fn problems_name_the_path_of_the_value() {
        let schema = json!({
            "type": "object",
            "properties": {"rows": {"type": "array", "items": {
                "type": "object",
                "properties": {"cells": {"type": "array", "items": {"type": ["integer", "null"]}}},
                "required": ["id"]
            }}},
        });
        let problems = validate_args(
            &schema,
            &json!({"rows": [{"id": 1}, {"cells": [1, "x", null]}]}),
        )
        .unwrap_err();
        assert_eq!(
            problems,
            [
                "`rows[1].id` is required",
                "`rows[1].cells[1]`: expected integer or null, got string \"x\"",
            ]
        );
        let list = json!({"type": "array", "items": {"type": "string"}});
        assert_eq!(
            validate_args(&list, &json!(["a", 2])).unwrap_err(),
            ["`[1]`: expected string, got number 2"]
        );
        assert_eq!(
            validate_args(&schema, &json!("rows")).unwrap_err(),
            ["the arguments: expected object, got string \"rows\""]
        );
        // A list of types with no names in it allows anything, as no `type` would.
        assert!(validate_args(&json!({"type": [1, 2]}), &json!("x")).is_ok());
    }

    /// `levels` levels, each a chain of `links` links made by `link` (from the name of the next
    /// definition) ending in `items` into the next level.
    fn chains(levels: usize, links: usize, link: fn(String) -> Value) -> Value {
        let name = |level: usize, r: usize| format!("#/$defs/l{level}r{r}");
        let mut defs = Map::new();
        for level in 0..=levels {
            for r in 0..links {
                let next = if r + 1 < links {
                    link(name(level, r + 1))
                } else if level < levels {
                    json!({"items": {"$ref": name(level + 1, 0)}})
                } else {
                    json!({"type": "integer"})
                };
                defs.insert(format!("l{level}r{r}"), next);
            }
        }
        json!({"$ref": "#/$defs/l0r0", "$defs": defs})
    }

    /// Chains of references (or of branches) as long as allowed at every level the arguments
    /// may reach: without a bound on them along the whole path the check recursed thousands
    /// of frames deep and overflowed a worker thread's stack.
    #[test]
    fn references_at_every_level_cannot_exhaust_the_stack() {
        let mut args = json!(1);
        for _ in 0..MAX_DEPTH {
            args = json!([args]);
        }
        let by_ref: fn(String) -> Value = |next| json!({"$ref": next});
        let by_branch: fn(String) -> Value = |next| json!({"allOf": [{"$ref": next}]});
        // A branch and its reference are two steps: half as many links fill a level.
        for (links, link) in [(MAX_REF_CHAIN, by_ref), (MAX_REF_CHAIN / 2, by_branch)] {
            let schema = chains(MAX_DEPTH, links, link);
            let args = args.clone();
            // Half of a tokio worker thread's stack, in any build.
            let problems = std::thread::Builder::new()
                .stack_size(1 << 20)
                .spawn(move || validate_args(&schema, &args))
                .unwrap()
                .join()
                .unwrap()
                .unwrap_err();
            assert!(
                problems[0].contains(&format!("more than {MAX_PATH_REFS} references")),
                "{problems:?}"
            );
        }
        // Within the bound, such a schema is checked as before.
        let schema = chains(MAX_PATH_REFS / MAX_REF_CHAIN - 2, MAX_REF_CHAIN, by_ref);
        let levels = |leaf: Value| {
            (0..MAX_PATH_REFS / MAX_REF_CHAIN - 2).fold(leaf, |inner, _| json!([inner]))
        };
        assert_eq!(validate_args(&schema, &levels(json!(1))), Ok(()));
        let problems = validate_args(&schema, &levels(json!("x"))).unwrap_err();
        assert!(problems[0].contains("expected integer"), "{problems:?}");
        // A recursive tagged enum as deep as arguments may nest is still checked.
        assert_eq!(
            validate_args(&expr_schema(), &nested(MAX_DEPTH / 2 - 1, "num")),
            Ok(())
        );
    }

    /// What a problem quotes and lists is cut, and only the first problems are written out:
    /// a hostile schema (a huge `enum`, thousands of properties) or huge arguments cost
    /// checks, never messages as large as themselves, let alone one such message per value.
    #[test]
    fn problems_stay_small_whatever_the_schema_and_arguments() {
        for size in [1 << 10, 1 << 20] {
            let big = "é".repeat(size / 2);
            let cases = [
                (json!({"enum": ["a", "b"]}), json!(big)),
                (json!({"const": big.clone()}), json!("x")),
                (json!({"type": "integer"}), json!(big)),
                (
                    json!({"oneOf": [{"const": big.clone()}, {"const": 2}]}),
                    json!([big.clone()]),
                ),
            ];
            for (schema, args) in cases {
                let problems = validate_args(&schema, &args).unwrap_err();
                assert_eq!(problems.len(), 1, "{problems:?}");
                assert!(problems[0].len() < 400, "{}", problems[0].len());
                assert!(problems[0].contains('…'), "{}", problems[0]);
            }
        }
        // A list of 100,000 allowed values, and 1,000 values none of which is allowed.
        let options: Vec<Value> = (0..100_000).map(|i| json!(format!("option {i}"))).collect();
        let schema = json!({"type": "array", "items": {"enum": options}});
        let args: Vec<Value> = (0..1000).map(|i| json!(format!("wrong {i}"))).collect();
        let problems = validate_args(&schema, &json!(args)).unwrap_err();
        assert!(problems.len() <= MAX_PROBLEMS + 1, "{}", problems.len());
        assert!(problems.iter().all(|p| p.len() < 2000), "{problems:?}");
        assert!(
            problems[0].ends_with("\"option 19\", … (100000 in all), got \"wrong 0\""),
            "{}",
            problems[0]
        );
        // Each option compared is a step: the budget ends the check.
        assert!(
            problems.iter().any(|p| p.contains("too large")),
            "{problems:?}"
        );
        // 50,000 accepted names and 10,000 unknown keys.
        let properties: Map<String, Value> =
            (0..50_000).map(|i| (format!("p{i}"), json!({}))).collect();
        let schema = json!({"properties": properties, "additionalProperties": false});
        let args: Map<String, Value> = (0..10_000).map(|i| (format!("x{i}"), json!(1))).collect();
        let problems = validate_args(&schema, &Value::Object(args)).unwrap_err();
        assert_eq!(problems.len(), MAX_PROBLEMS + 1);
        assert_eq!(problems[MAX_PROBLEMS], "… and 9900 more problems");
        assert!(problems.iter().all(|p| p.len() < 400), "{}", problems[0]);
        assert!(
            problems[0].ends_with("… (50000 in all))"),
            "{}",
            problems[0]
        );
        // Short texts are quoted whole.
        assert_eq!(
            validate_args(&json!({"enum": ["a", "b"]}), &json!("c")).unwrap_err(),
            ["the arguments: must be one of \"a\", \"b\", got \"c\""]
        );
    }

    #[test]
    fn clipping_keeps_whole_characters() {
        for text in [
            "é".repeat(200),
            "a".repeat(200),
            "日本".repeat(100),
            "😀".repeat(100),
        ] {
            let clipped = clip_json(&json!(text));
            assert_eq!(clipped.chars().count(), QUOTED + 1, "{clipped}");
            assert!(clipped.ends_with('…'));
            assert!(clipped.starts_with('"'));
        }
        assert_eq!(clip_json(&json!({"a": [1, 2]})), r#"{"a":[1,2]}"#);
        assert_eq!(clip(&"x".repeat(QUOTED)), "x".repeat(QUOTED));
    }

    #[test]
    fn integers_accept_whole_floats_only() {
        let schema = json!({"type": "integer"});
        assert!(validate_args(&schema, &json!(3.0)).is_ok());
        assert!(validate_args(&schema, &json!(3.5)).is_err());
    }
}
