//! Checking a model's tool arguments against the tool's JSON Schema.
//!
//! Covers what tool schemas use in practice (and what `schemars` emits): `type` (also lists of
//! types), `properties`, `required`, `additionalProperties`, `enum`, `const`, `items`,
//! `anyOf` / `oneOf` / `allOf`, `$ref` into `$defs` / `definitions`, `minimum` / `maximum`,
//! `minLength` / `maxLength`, `minItems` / `maxItems`, and `nullable`. Unknown keywords are
//! ignored. Messages name the path of the offending value, so the model can fix its call.

use serde_json::{Map, Value};

/// Checks `args` against `schema`; on failure returns every problem found.
///
/// ```
/// use serde_json::json;
/// let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
/// assert!(kit::tool::validate_args(&schema, &json!({"n": 3})).is_ok());
/// let problems = kit::tool::validate_args(&schema, &json!({"n": "3"})).unwrap_err();
/// assert_eq!(problems, ["`n`: expected integer, got string \"3\""]);
/// ```
pub fn validate_args(schema: &Value, args: &Value) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    check(schema, schema, args, "", &mut problems, 0);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

const MAX_DEPTH: usize = 64;

fn check(
    root: &Value,
    schema: &Value,
    value: &Value,
    path: &str,
    problems: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let Value::Object(s) = schema else {
        // `true` / `false` schemas.
        if schema == &Value::Bool(false) {
            problems.push(format!("{}: no value is allowed here", at(path)));
        }
        return;
    };
    if let Some(Value::String(reference)) = s.get("$ref") {
        // An unresolvable reference cannot be checked; the handler decides.
        if let Some(target) = resolve(root, reference) {
            check(root, target, value, path, problems, depth + 1);
        }
    }
    if value.is_null() && s.get("nullable") == Some(&Value::Bool(true)) {
        return;
    }
    if let Some(t) = s.get("type") {
        let allowed: Vec<&str> = match t {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !allowed.is_empty() && !allowed.iter().any(|t| has_type(value, t)) {
            problems.push(format!(
                "{}: expected {}, got {}",
                at(path),
                allowed.join(" or "),
                describe(value)
            ));
            return;
        }
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(value)
    {
        let list: Vec<String> = options.iter().map(Value::to_string).collect();
        problems.push(format!(
            "{}: must be one of {}, got {}",
            at(path),
            list.join(", "),
            value
        ));
    }
    if let Some(expected) = s.get("const")
        && expected != value
    {
        problems.push(format!("{}: must be {expected}, got {value}", at(path)));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = s.get(key) {
            let matching = options
                .iter()
                .filter(|o| {
                    let mut sub = Vec::new();
                    check(root, o, value, path, &mut sub, depth + 1);
                    sub.is_empty()
                })
                .count();
            let ok = if key == "oneOf" {
                matching == 1
            } else {
                matching >= 1
            };
            if !ok {
                // schemars writes documented enums as `oneOf` of `const`s: name the values.
                let consts: Vec<String> = options
                    .iter()
                    .filter_map(|o| o.get("const").map(Value::to_string))
                    .collect();
                if consts.len() == options.len() && !consts.is_empty() {
                    problems.push(format!(
                        "{}: must be one of {}, got {value}",
                        at(path),
                        consts.join(", ")
                    ));
                } else {
                    problems.push(format!(
                        "{}: {} does not match any of the allowed shapes",
                        at(path),
                        describe(value)
                    ));
                }
            }
        }
    }
    if let Some(Value::Array(all)) = s.get("allOf") {
        for sub in all {
            check(root, sub, value, path, problems, depth + 1);
        }
    }
    match value {
        Value::Object(map) => check_object(root, s, map, path, problems, depth),
        Value::Array(items) => {
            if let Some(item_schema) = s.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(
                        root,
                        item_schema,
                        item,
                        &format!("{path}[{i}]"),
                        problems,
                        depth + 1,
                    );
                }
            }
            bound(
                s,
                "minItems",
                items.len(),
                path,
                "at least",
                "items",
                problems,
            );
            bound(
                s,
                "maxItems",
                items.len(),
                path,
                "at most",
                "items",
                problems,
            );
        }
        Value::String(text) => {
            let n = text.chars().count();
            bound(s, "minLength", n, path, "at least", "characters", problems);
            bound(s, "maxLength", n, path, "at most", "characters", problems);
        }
        Value::Number(n) => {
            if let (Some(min), Some(v)) = (s.get("minimum").and_then(Value::as_f64), n.as_f64())
                && v < min
            {
                problems.push(format!("{}: must be at least {min}, got {n}", at(path)));
            }
            if let (Some(max), Some(v)) = (s.get("maximum").and_then(Value::as_f64), n.as_f64())
                && v > max
            {
                problems.push(format!("{}: must be at most {max}, got {n}", at(path)));
            }
        }
        _ => {}
    }
}

fn check_object(
    root: &Value,
    s: &Map<String, Value>,
    map: &Map<String, Value>,
    path: &str,
    problems: &mut Vec<String>,
    depth: usize,
) {
    let properties = s.get("properties").and_then(Value::as_object);
    if let Some(Value::Array(required)) = s.get("required") {
        for key in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(key) {
                problems.push(format!("{} is required", at(&join(path, key))));
            }
        }
    }
    for (key, value) in map {
        let child = join(path, key);
        match properties.and_then(|p| p.get(key)) {
            Some(prop) => check(root, prop, value, &child, problems, depth + 1),
            None => match s.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    let known: Vec<&String> =
                        properties.map(|p| p.keys().collect()).unwrap_or_default();
                    let known: Vec<&str> = known.iter().map(|k| k.as_str()).collect();
                    problems.push(format!(
                        "{} is not an accepted argument{}",
                        at(&child),
                        if known.is_empty() {
                            String::new()
                        } else {
                            format!(" (accepted: {})", known.join(", "))
                        }
                    ));
                }
                Some(extra @ Value::Object(_)) => {
                    check(root, extra, value, &child, problems, depth + 1)
                }
                _ => {}
            },
        }
    }
}

fn bound(
    s: &Map<String, Value>,
    key: &str,
    actual: usize,
    path: &str,
    word: &str,
    unit: &str,
    problems: &mut Vec<String>,
) {
    if let Some(limit) = s.get(key).and_then(Value::as_u64) {
        let bad = if word == "at least" {
            (actual as u64) < limit
        } else {
            (actual as u64) > limit
        };
        if bad {
            problems.push(format!(
                "{}: must have {word} {limit} {unit}, has {actual}",
                at(path)
            ));
        }
    }
}

fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
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
    let text = value.to_string();
    let clipped = if text.chars().count() > 60 {
        format!("{}…", text.chars().take(60).collect::<String>())
    } else {
        text
    };
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

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn at(path: &str) -> String {
    if path.is_empty() {
        "the arguments".to_string()
    } else {
        format!("`{path}`")
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

    #[test]
    fn integers_accept_whole_floats_only() {
        let schema = json!({"type": "integer"});
        assert!(validate_args(&schema, &json!(3.0)).is_ok());
        assert!(validate_args(&schema, &json!(3.5)).is_err());
    }
}
