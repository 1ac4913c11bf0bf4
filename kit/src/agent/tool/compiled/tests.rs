#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use serde_json::json;

/// The compiled check answers as the interpreter does, and a compiled schema decides alone:
/// it accepts exactly the arguments the interpreter finds no problem with.
fn agrees(schema: &Value, args: &Value) {
    let check = ArgsCheck::new(schema);
    let interpreted = validate_args(schema, args);
    assert_eq!(
        check.validate(schema, args),
        interpreted,
        "schema {schema}\nargs {args}"
    );
    if let Some(node) = &check.compiled {
        assert_eq!(
            node.accepts(args, 0, &mut 0),
            interpreted.is_ok(),
            "schema {schema}\nargs {args}"
        );
    }
}

fn compiled(schema: &Value) -> bool {
    ArgsCheck::new(schema).is_compiled()
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
enum Status {
    Pending,
    Done,
}

/// A derived tool's arguments, as schemars describes them.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Search {
    query: String,
    limit: Option<u32>,
    tags: Vec<String>,
    status: Status,
    score: f64,
}

#[test]
fn compiles_the_schemas_tools_are_made_with() {
    let derived = serde_json::to_value(schemars::schema_for!(Search)).unwrap();
    // schemars names the enum through a `$ref` into `$defs`.
    assert!(derived.to_string().contains("$ref"), "{derived}");
    assert!(compiled(&derived));
    for args in [
        json!({"query": "q", "limit": null, "tags": [], "status": "Done", "score": 1}),
        json!({"query": "q", "limit": 3, "tags": ["a"], "status": "Pending", "score": 0.5}),
        json!({"query": "q", "tags": [], "status": "Later", "score": 1}),
        json!({"query": "q", "limit": -3, "tags": [], "status": "Done", "score": 1}),
        json!({"query": "q", "tags": [], "score": 1}),
    ] {
        agrees(&derived, &args);
    }
    let plain = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Search",
        "description": "Finds things.",
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 200},
            "limit": {"type": ["integer", "null"], "format": "uint32", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
            "status": {"type": "string", "enum": ["pending", "done"]},
            "score": {"type": "number", "maximum": 1.0},
            "exact": {"const": true},
            "note": {"type": "string", "nullable": true}
        },
        "required": ["query", "tags"],
        "additionalProperties": false
    });
    assert!(compiled(&plain));
    for args in [
        json!({"query": "rust", "tags": []}),
        json!({"query": "rust", "tags": ["a", "b"], "limit": 3, "status": "done", "score": 0.5}),
        json!({"query": "rust", "tags": [], "limit": null, "exact": true, "note": null}),
        json!({"query": "rust", "tags": [], "limit": 3.0}),
        // Each of these breaks one keyword.
        json!({"query": "", "tags": []}),
        json!({"query": "x".repeat(201), "tags": []}),
        json!({"query": "rust"}),
        json!({"query": "rust", "tags": [1]}),
        json!({"query": "rust", "tags": vec!["a"; 9]}),
        json!({"query": "rust", "tags": [], "limit": -1}),
        json!({"query": "rust", "tags": [], "limit": 2.5}),
        json!({"query": "rust", "tags": [], "limit": "3"}),
        json!({"query": "rust", "tags": [], "status": "later"}),
        json!({"query": "rust", "tags": [], "score": 1.5}),
        json!({"query": "rust", "tags": [], "exact": false}),
        json!({"query": "rust", "tags": [], "note": 7}),
        json!({"query": "rust", "tags": [], "extra": 1}),
        json!({"query": 7, "tags": []}),
    ] {
        agrees(&plain, &args);
    }
}

#[test]
fn branches_recursion_and_long_reference_chains_are_interpreted() {
    let chain: Map<String, Value> = (0..=MAX_REFS)
        .map(|i| {
            (
                format!("d{i}"),
                json!({"$ref": format!("#/$defs/d{}", i + 1)}),
            )
        })
        .chain([(format!("d{}", MAX_REFS + 1), json!({"type": "object"}))])
        .collect();
    for schema in [
        json!({"properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}),
        json!({"properties": {"a": {"oneOf": [{"const": 1}, {"const": 2}]}}}),
        json!({"items": {"allOf": [{"type": "string"}]}}),
        // Recursive: through the value, and through references alone.
        json!({"additionalProperties": {"$ref": "#"}}),
        json!({"$ref": "#/$defs/T", "$defs": {"T": {"type": "object",
            "properties": {"a": {"type": "array", "items": {"$ref": "#/$defs/T"}}}}}}),
        json!({"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}}),
        json!({"$ref": "#/$defs/d0", "$defs": chain}),
        nested_types(MAX_REFS + 1),
    ] {
        assert!(!compiled(&schema), "{schema}");
        for args in [
            json!({"a": "x"}),
            json!({"a": 3}),
            json!({"a": [{"a": []}]}),
        ] {
            agrees(&schema, &args);
        }
    }
    // The same keywords in a form the interpreter ignores do not stop the compiling, nor do
    // references it cannot resolve (it does not check them), nor a chain within the limit.
    let mut short = chain.clone();
    short.insert(format!("d{MAX_REFS}"), json!({"type": "object"}));
    for schema in [
        json!({"$ref": 7, "type": "object"}),
        json!({"anyOf": {"type": "string"}, "oneOf": null, "allOf": "x", "type": "object"}),
        json!({"$ref": "#/$defs/missing", "type": "object"}),
        json!({"$ref": "https://example.com/schema.json", "type": "object"}),
        json!({"$ref": "#/$defs/A", "$defs": {"A": {"type": "object"}}}),
        json!({"$ref": "#/$defs/d1", "$defs": short}),
        nested_types(MAX_REFS),
    ] {
        assert!(compiled(&schema), "{schema}");
        for args in [json!({"a": 1}), json!("x"), json!(null)] {
            agrees(&schema, &args);
        }
    }
}

/// `n` named types each holding the next one in a property, as schemars writes them: `n`
/// references on the way to the innermost.
fn nested_types(n: usize) -> Value {
    let defs: Map<String, Value> = (0..n)
        .map(|i| {
            let next = if i + 1 == n {
                json!({"type": "integer"})
            } else {
                json!({"$ref": format!("#/$defs/t{}", i + 1)})
            };
            (
                format!("t{i}"),
                json!({"type": "object", "properties": {"a": next}}),
            )
        })
        .collect();
    json!({"$ref": "#/$defs/t0", "$defs": defs})
}

#[test]
fn a_reference_is_checked_beside_the_keywords_next_to_it() {
    let schema = json!({
        "$defs": {"Short": {"type": "string", "maxLength": 3}},
        "properties": {
            "a": {"$ref": "#/$defs/Short", "minLength": 2},
            "b": {"$ref": "#/$defs/Short", "nullable": true},
            "c": {"nullable": true, "$ref": "#/$defs/Nothing"}
        }
    });
    assert!(compiled(&schema));
    for args in [
        json!({"a": "ab"}),
        json!({"a": "a"}),
        json!({"a": "abcd"}),
        json!({"a": 1}),
        // `nullable` next to a reference does not excuse the reference's own type.
        json!({"b": null}),
        json!({"b": "ab"}),
        json!({"c": null}),
        json!({"c": 1}),
    ] {
        agrees(&schema, &args);
    }
}

#[test]
fn definitions_that_multiply_when_inlined_are_interpreted() {
    // Each definition uses the next one twice: 2^40 nodes if every use were compiled.
    let defs: Map<String, Value> = (0..40)
        .map(|i| {
            let next = format!("#/$defs/d{}", i + 1);
            (
                format!("d{i}"),
                json!({"properties": {"l": {"$ref": next}, "r": {"$ref": next}}}),
            )
        })
        .chain([("d40".to_string(), json!({"type": "integer"}))])
        .collect();
    let schema = json!({"$ref": "#/$defs/d0", "$defs": defs});
    assert!(!compiled(&schema));
    agrees(&schema, &json!({"l": {"r": {"l": 1}}}));
    agrees(&schema, &json!({"l": {"r": {"l": {"r": "x"}}}}));
}

#[test]
fn odd_schemas_read_as_the_interpreter_reads_them() {
    let cases = [
        (json!(true), json!({"a": 1})),
        (json!({"properties": {"a": false}}), json!({"a": 1})),
        (json!({"properties": {"a": false}}), json!({"b": 1})),
        (json!({"properties": {"a": 7}}), json!({"a": [1]})),
        (json!({"type": [1, 2]}), json!("x")),
        (json!({"type": []}), json!("x")),
        (json!({"type": ["string", 3]}), json!(4)),
        (json!({"type": "whatever"}), json!(4)),
        (json!({"type": null}), json!(4)),
        (json!({"properties": []}), json!({"a": 1})),
        (
            json!({"properties": [], "additionalProperties": false}),
            json!({"a": 1}),
        ),
        (json!({"required": "a"}), json!({})),
        (
            json!({"properties": {"a": {}, "c": {}}, "required": ["a", "a", "b"]}),
            json!({"a": 1, "c": 2}),
        ),
        (
            json!({"properties": {"a": {}, "c": {}}, "required": ["a", "a", "b"]}),
            json!({"a": 1, "b": 2}),
        ),
        (
            json!({"properties": {"a": {}, "b": {}, "c": {}}, "required": ["c", "a"]}),
            json!({"a": 1, "b": 2}),
        ),
        (
            json!({"properties": {"a": {}, "b": {}, "c": {}}, "required": ["c", "a"]}),
            json!({"a": 1, "c": 2, "d": 3}),
        ),
        (json!({"required": ["a", 3]}), json!({"a": 1})),
        (json!({"additionalProperties": true}), json!({"a": 1})),
        (json!({"additionalProperties": 0}), json!({"a": 1})),
        (
            json!({"additionalProperties": {"type": "integer"}}),
            json!({"a": 1, "b": "2"}),
        ),
        (json!({"items": false}), json!([])),
        (json!({"items": false}), json!([1])),
        (json!({"minItems": -1, "maxItems": 1.5}), json!([1, 2, 3])),
        (json!({"minimum": "3"}), json!(1)),
        (json!({"minimum": 1, "maximum": 1}), json!(1)),
        (json!({"maximum": -1}), json!(u64::MAX)),
        (json!({"minimum": 0}), json!(i64::MIN)),
        (json!({"minLength": 2, "maxLength": 2}), json!("éé")),
        (json!({"minLength": 3}), json!("éé")),
        (json!({"enum": "a"}), json!("b")),
        (json!({"enum": []}), json!("b")),
        (json!({"enum": [{"a": [1]}]}), json!({"a": [1]})),
        (json!({"const": null}), json!(null)),
        (json!({"const": null}), json!(0)),
        (json!({"nullable": true, "type": "string"}), json!(null)),
        (json!({"nullable": "yes", "type": "string"}), json!(null)),
        (json!({"nullable": true, "enum": ["a"]}), json!(null)),
        (json!({"type": "integer"}), json!(3.0)),
        (json!({"type": "integer"}), json!(1e300)),
        (json!({"type": "integer"}), json!(3.5)),
        (json!({"type": ["integer", "null"]}), json!(null)),
    ];
    for (schema, args) in cases {
        agrees(&schema, &args);
    }
}

/// Random schemas over every keyword the interpreter reads, and random arguments partly shaped
/// after them (so that many are valid).
#[test]
fn random_schemas_and_arguments_agree_with_the_interpreter() {
    let mut rng = fastrand::Rng::with_seed(0x5eed_cafe);
    let (mut accepted, mut rejected, mut schemas_compiled) = (0, 0, 0);
    for _ in 0..4000 {
        let mut schema = random_schema(&mut rng, 0);
        if let Value::Object(root) = &mut schema {
            let recursive = json!({"type": "array", "items": {"$ref": "#/$defs/d2"}});
            let defs = [
                random_schema(&mut rng, 2),
                random_schema(&mut rng, 2),
                recursive,
            ];
            root.insert(
                "$defs".into(),
                json!({"d0": defs[0], "d1": defs[1], "d2": defs[2]}),
            );
        }
        schemas_compiled += usize::from(compiled(&schema));
        for _ in 0..4 {
            let args = random_args(&mut rng, &schema, 0);
            agrees(&schema, &args);
            if validate_args(&schema, &args).is_ok() {
                accepted += 1;
            } else {
                rejected += 1;
            }
        }
    }
    // Both answers were exercised, many times each, and most schemas were compiled.
    assert!(accepted > 2000 && rejected > 2000, "{accepted} {rejected}");
    assert!(schemas_compiled > 2000, "{schemas_compiled}");
}

fn random_schema(rng: &mut fastrand::Rng, depth: usize) -> Value {
    match rng.u8(0..20) {
        0 => return json!(true),
        1 => return json!(false),
        _ => {}
    }
    let mut s = Map::new();
    let kind = if depth > 3 {
        rng.u8(2..6)
    } else {
        rng.u8(0..6)
    };
    let types = [
        "object", "array", "string", "integer", "number", "boolean", "null",
    ];
    if rng.u8(0..4) > 0 {
        let t = match kind {
            0 => "object",
            1 => "array",
            2 => "string",
            3 => "integer",
            4 => "number",
            _ => types[rng.usize(0..types.len())],
        };
        s.insert(
            "type".into(),
            if rng.bool() {
                json!(t)
            } else {
                json!([t, types[rng.usize(0..types.len())]])
            },
        );
    }
    match kind {
        0 => {
            let mut properties = Map::new();
            for name in ["a", "b", "c"].iter().take(rng.usize(0..4)) {
                properties.insert((*name).into(), random_schema(rng, depth + 1));
            }
            s.insert("properties".into(), Value::Object(properties));
            if rng.bool() {
                s.insert(
                    "required".into(),
                    Value::from(["a", "b"][..rng.usize(0..3)].to_vec()),
                );
            }
            match rng.u8(0..4) {
                0 => {
                    s.insert("additionalProperties".into(), json!(false));
                }
                1 => {
                    s.insert("additionalProperties".into(), random_schema(rng, depth + 1));
                }
                _ => {}
            }
        }
        1 => {
            if rng.u8(0..4) > 0 {
                s.insert("items".into(), random_schema(rng, depth + 1));
            }
            if rng.bool() {
                s.insert("minItems".into(), json!(rng.u8(0..3)));
            }
            if rng.bool() {
                s.insert("maxItems".into(), json!(rng.u8(0..4)));
            }
        }
        2 => {
            if rng.bool() {
                s.insert("minLength".into(), json!(rng.u8(0..3)));
            }
            if rng.bool() {
                s.insert("maxLength".into(), json!(rng.u8(0..5)));
            }
            if rng.u8(0..3) == 0 {
                s.insert("enum".into(), json!(["a", "bb", "ccc"]));
            }
        }
        3 | 4 => {
            if rng.bool() {
                s.insert("minimum".into(), json!(rng.i8(-3..3)));
            }
            if rng.bool() {
                s.insert("maximum".into(), json!(f64::from(rng.i8(-3..6)) / 2.0));
            }
        }
        _ => {}
    }
    match rng.u8(0..12) {
        0 => {
            s.insert("const".into(), random_plain(rng));
        }
        1 => {
            s.insert("nullable".into(), json!(true));
        }
        2 => {
            s.insert("enum".into(), json!([1, "a", null]));
        }
        3 => {
            // A keyword left to the interpreter.
            s.insert(
                "anyOf".into(),
                json!([{"type": "string"}, {"type": "integer"}]),
            );
        }
        4 => {
            s.insert("description".into(), json!("ignored"));
        }
        5 | 6 if depth > 0 => {
            let to = ["d0", "d1", "d2", "missing"][rng.usize(0..4)];
            s.insert("$ref".into(), json!(format!("#/$defs/{to}")));
        }
        _ => {}
    }
    Value::Object(s)
}

fn random_plain(rng: &mut fastrand::Rng) -> Value {
    match rng.u8(0..8) {
        0 => Value::Null,
        1 => json!(rng.bool()),
        2 => json!(rng.i8(-4..6)),
        3 => json!(f64::from(rng.i8(-4..6)) / 2.0),
        4 => json!(["", "a", "bb", "ccc", "éé", "dddd"][rng.usize(0..6)]),
        5 => json!(u64::MAX),
        6 => json!([1, "a"]),
        _ => json!({"a": 1}),
    }
}

fn random_args(rng: &mut fastrand::Rng, schema: &Value, depth: usize) -> Value {
    if depth > 4 || rng.u8(0..5) == 0 {
        return random_plain(rng);
    }
    let wants = schema
        .get("type")
        .and_then(|t| t.as_str().or_else(|| t.get(0).and_then(Value::as_str)));
    match wants {
        Some("object") | None if schema.get("properties").is_some() => {
            let mut map = Map::new();
            for name in ["a", "b", "c", "d"] {
                if rng.u8(0..3) > 0 {
                    let sub = schema
                        .get("properties")
                        .and_then(|p| p.get(name))
                        .cloned()
                        .unwrap_or(Value::Bool(true));
                    map.insert(name.into(), random_args(rng, &sub, depth + 1));
                }
            }
            Value::Object(map)
        }
        Some("array") => {
            let sub = schema.get("items").cloned().unwrap_or(Value::Bool(true));
            (0..rng.usize(0..4))
                .map(|_| random_args(rng, &sub, depth + 1))
                .collect()
        }
        Some("string") => json!(["", "a", "bb", "ccc", "éé", "dddd"][rng.usize(0..6)]),
        Some("integer") => json!(rng.i8(-4..6)),
        Some("number") => json!(f64::from(rng.i8(-8..12)) / 2.0),
        Some("boolean") => json!(rng.bool()),
        _ => random_plain(rng),
    }
}

/// A list of `n` rows, each an object of a string and an integer.
fn rows(n: usize) -> Value {
    (0..n)
        .map(|i| json!({"name": format!("row {i}"), "n": i}))
        .collect()
}

#[test]
fn large_arguments_are_checked_the_same_at_1_kib_and_1_mib() {
    let schema = json!({
        "type": "object",
        "properties": {"rows": {"type": "array", "items": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "n": {"type": "integer", "minimum": 0}},
            "required": ["name", "n"],
            "additionalProperties": false
        }}},
        "required": ["rows"]
    });
    let check = ArgsCheck::new(&schema);
    assert!(check.is_compiled());
    for n in [42, 40_000] {
        let mut args = json!({"rows": rows(n)});
        let size = args.to_string().len();
        assert!(
            (1 << 10..2 << 10).contains(&size) || (1 << 20..2 << 20).contains(&size),
            "{size}"
        );
        assert_eq!(check.validate(&schema, &args), Ok(()));
        // One bad row at the end: the interpreter names it.
        args["rows"][n - 1]["n"] = json!(-1);
        let problems = check.validate(&schema, &args).unwrap_err();
        assert_eq!(
            problems,
            [format!("`rows[{}].n`: must be at least 0, got -1", n - 1)]
        );
        agrees(&schema, &args);
    }
}

#[test]
fn the_step_budget_and_the_depth_limit_hold_on_the_compiled_path() {
    let list = json!({"type": "array", "items": {"type": "integer"}});
    let check = ArgsCheck::new(&list);
    let long: Value = (0..MAX_STEPS).map(|i| json!(i)).collect();
    assert_eq!(
        check.validate(&list, &long),
        validate_args(&list, &long),
        "the budget counts as the interpreter counts"
    );
    let problems = check.validate(&list, &long).unwrap_err();
    assert!(
        problems[0].contains("too large or too deeply nested"),
        "{problems:?}"
    );
    // One step fewer is within the budget.
    let shorter: Value = (0..MAX_STEPS - 1).map(|i| json!(i)).collect();
    assert_eq!(check.validate(&list, &shorter), Ok(()));

    // A leaf schema one level below the deepest allowed value: reached only by arguments
    // nested too deep, which it refuses as the interpreter does.
    let mut schema = json!(true);
    for _ in 0..=MAX_DEPTH {
        schema = json!({"items": schema});
    }
    assert!(compiled(&schema));
    let mut deep = json!(1);
    for _ in 0..=MAX_DEPTH {
        deep = json!([deep]);
    }
    agrees(&schema, &deep);
    let problems = ArgsCheck::new(&schema)
        .validate(&schema, &deep)
        .unwrap_err();
    assert!(problems[0].contains("nested more than"), "{problems:?}");
    let shallower = deep[0].clone();
    agrees(&schema, &shallower);
    assert!(
        ArgsCheck::new(&schema)
            .validate(&schema, &shallower)
            .is_ok()
    );

    // A reference at the deepest level is checked at that level, not one below.
    let mut schema = json!({"$ref": "#/$defs/Leaf"});
    for _ in 0..MAX_DEPTH {
        schema = json!({"items": schema});
    }
    schema["$defs"] = json!({"Leaf": {"type": "integer"}});
    assert!(compiled(&schema));
    let mut deepest = json!(1);
    for _ in 0..MAX_DEPTH {
        deepest = json!([deepest]);
    }
    agrees(&schema, &deepest);
    assert!(ArgsCheck::new(&schema).validate(&schema, &deepest).is_ok());
}

#[test]
fn a_schema_deeper_than_any_argument_is_not_compiled() {
    let mut deep = json!({"type": "string"});
    for _ in 0..2000 {
        deep = json!({"type": "array", "items": deep});
    }
    assert!(!compiled(&deep));
    agrees(&deep, &json!([[["x"]]]));
    let mut within = json!({"type": "string"});
    for _ in 0..MAX_DEPTH {
        within = json!({"items": within});
    }
    assert!(compiled(&within));
    agrees(&within, &json!([[["x"]]]));
}

#[test]
fn a_wide_schema_compiles_and_checks_in_linear_time() {
    let properties: Map<String, Value> = (0..50_000)
        .map(|i| (format!("p{i}"), json!({"type": "integer"})))
        .collect();
    let schema = json!({"type": "object", "properties": properties});
    let check = ArgsCheck::new(&schema);
    assert!(check.is_compiled());
    let args: Map<String, Value> = (0..50_000).map(|i| (format!("p{i}"), json!(i))).collect();
    let args = Value::Object(args);
    assert_eq!(check.validate(&schema, &args), Ok(()));
    let mut wrong = args.clone();
    wrong["p49999"] = json!("x");
    assert_eq!(
        check.validate(&schema, &wrong),
        validate_args(&schema, &wrong)
    );
    assert!(check.validate(&schema, &wrong).is_err());
}
