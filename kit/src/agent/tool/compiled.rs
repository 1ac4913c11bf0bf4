//! A tool's argument schema compiled once, so that a valid call is accepted without reading the
//! schema again.
//!
//! [`validate_args`] interprets the schema on every call: it finds each schema object's
//! keywords among its keys, looks properties up in a map and compares type names as text. For
//! a tool called once per model turn that is most of the work of checking arguments that are
//! fine, as they nearly always are. [`ArgsCheck`] does that reading once, when the tool is
//! made, into a tree of [`Node`]s; checking a call then walks the arguments and the tree.
//!
//! The tree only *accepts*. It answers "valid" exactly when [`validate_args`] finds no
//! problem, and otherwise hands the call to [`validate_args`], which names the problems, so
//! the messages a model sees have one source. A `$ref` is compiled where it is used. Schemas
//! with `anyOf` / `oneOf` / `allOf` lists (whose branches the interpreter remembers), schemas
//! nested or recursive deeper than any argument can be, and schemas that would compile to too
//! many nodes are not compiled: they are interpreted as before.

use serde_json::{Map, Value};

use super::validate::{MAX_DEPTH, MAX_STEPS, resolve, validate_args};

/// A tool's argument check: the compiled schema when it could be compiled.
#[derive(Debug)]
pub(crate) struct ArgsCheck {
    compiled: Option<Node>,
}

impl ArgsCheck {
    /// Compiles `schema`; one that cannot be compiled is interpreted on every call.
    pub(crate) fn new(schema: &Value) -> ArgsCheck {
        let mut compiler = Compiler {
            root: schema,
            budget: MAX_NODES,
        };
        ArgsCheck {
            compiled: compiler.node(schema, 0, 0),
        }
    }

    /// What [`validate_args`]`(schema, args)` returns, for the `schema` this was made from.
    pub(crate) fn validate(&self, schema: &Value, args: &Value) -> Result<(), Vec<String>> {
        match &self.compiled {
            Some(node) if node.accepts(args, 0, &mut 0) => Ok(()),
            _ => validate_args(schema, args),
        }
    }

    /// Whether the schema was compiled (tests).
    #[cfg(test)]
    fn is_compiled(&self) -> bool {
        self.compiled.is_some()
    }
}

/// One sub-schema, read.
#[derive(Debug)]
enum Node {
    /// `true`, and any schema that is not an object or a boolean: everything matches.
    Any,
    /// `false`: nothing matches.
    Never,
    /// A schema object.
    Object(Box<Keywords>),
}

/// The keywords of a schema object that [`validate_args`] reads, in the form it reads them.
#[derive(Debug, Default)]
struct Keywords {
    /// The schema a `$ref` points to: the value must match it too.
    reference: Option<Box<Node>>,
    /// `nullable: true`: null matches before anything else is checked.
    nullable: bool,
    /// The kinds of value `type` allows ([`Kinds::ALL`] when it allows anything).
    kinds: Kinds,
    /// `enum`, when it is a list.
    enumeration: Option<Vec<Value>>,
    /// `const`.
    constant: Option<Value>,
    /// `properties`, when it is an object, sorted by name.
    properties: Option<Vec<Property>>,
    /// How many of `properties` are required: an object has them all when it has that many of
    /// them (its keys are distinct), found on the way through its keys.
    required_properties: usize,
    /// Required names that are not among `properties`: each looked up in the object.
    required_elsewhere: Vec<Box<str>>,
    /// What a key outside `properties` meets.
    additional: Additional,
    /// `items`.
    items: Option<Box<Node>>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    minimum: Option<f64>,
    maximum: Option<f64>,
}

/// One entry of `properties`.
#[derive(Debug)]
struct Property {
    name: Box<str>,
    schema: Node,
    /// Whether `required` names it.
    required: bool,
}

/// What `additionalProperties` says of a key outside `properties`.
#[derive(Debug, Default)]
enum Additional {
    /// Absent, `true`, or anything but `false` and an object.
    #[default]
    Allowed,
    /// `false`.
    Refused,
    /// A schema object the value must match.
    Checked(Box<Node>),
}

/// A set of JSON value kinds, as `type` names them (`integer` is a kind of its own: a number
/// with no fraction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Kinds(u8);

impl Kinds {
    const NONE: Kinds = Kinds(0);
    const ALL: Kinds = Kinds(u8::MAX);
    const OBJECT: u8 = 1;
    const ARRAY: u8 = 2;
    const STRING: u8 = 4;
    const BOOLEAN: u8 = 8;
    const NULL: u8 = 16;
    const NUMBER: u8 = 32;
    const INTEGER: u8 = 64;

    /// The kinds one type name allows: all of them for a name `validate_args` does not know.
    fn named(name: &str) -> Kinds {
        Kinds(match name {
            "object" => Self::OBJECT,
            "array" => Self::ARRAY,
            "string" => Self::STRING,
            "boolean" => Self::BOOLEAN,
            "null" => Self::NULL,
            "number" => Self::NUMBER,
            "integer" => Self::INTEGER,
            _ => u8::MAX,
        })
    }

    /// The kinds a `type` keyword allows: a name, or a list of names (a list with no names in
    /// it, and any other value, allow everything).
    fn of(types: &Value) -> Kinds {
        match types {
            Value::String(name) => Kinds::named(name),
            Value::Array(names) => {
                let kinds = names
                    .iter()
                    .filter_map(Value::as_str)
                    .fold(Kinds::NONE, |all, name| Kinds(all.0 | Kinds::named(name).0));
                if kinds == Kinds::NONE {
                    Kinds::ALL
                } else {
                    kinds
                }
            }
            _ => Kinds::ALL,
        }
    }

    fn allow(self, value: &Value) -> bool {
        let has = |kind: u8| self.0 & kind != 0;
        match value {
            Value::Object(_) => has(Self::OBJECT),
            Value::Array(_) => has(Self::ARRAY),
            Value::String(_) => has(Self::STRING),
            Value::Bool(_) => has(Self::BOOLEAN),
            Value::Null => has(Self::NULL),
            Value::Number(n) => {
                has(Self::NUMBER)
                    || (has(Self::INTEGER)
                        && (n.is_i64()
                            || n.is_u64()
                            || n.as_f64()
                                .is_some_and(|f| f.fract() == 0.0 && f.is_finite())))
            }
        }
    }
}

impl Default for Kinds {
    fn default() -> Self {
        Kinds::ALL
    }
}

/// The most nodes one schema compiles to. A `$ref` is compiled where it is used, so a schema
/// whose definitions refer to each other many times over could otherwise grow exponentially;
/// past this it is interpreted instead.
const MAX_NODES: usize = 100_000;

/// The most `$ref`s followed on the way from the root to any sub-schema. It also bounds how
/// deep compiling recurses (with [`MAX_DEPTH`]), whatever schema a peer sends. More than a
/// real schema's nesting of named types: past it the schema is interpreted.
const MAX_REFS: usize = 16;

/// Reads a schema into [`Node`]s.
struct Compiler<'a> {
    /// The whole schema: where `$ref`s point.
    root: &'a Value,
    /// Nodes left to make (see [`MAX_NODES`]).
    budget: usize,
}

impl Compiler<'_> {
    /// Reads `schema`, met `depth` levels into the arguments after following `refs`
    /// references from the root; `None` when it uses a keyword this form leaves to
    /// [`validate_args`], or cannot be compiled within the limits.
    fn node(&mut self, schema: &Value, depth: usize, refs: usize) -> Option<Node> {
        self.budget = self.budget.checked_sub(1)?;
        let object = match schema {
            Value::Object(object) => object,
            Value::Bool(false) => return Some(Node::Never),
            _ => return Some(Node::Any),
        };
        // Arguments nest at most MAX_DEPTH levels, so a deeper schema is never reached; one
        // that deep (a recursive one, say) is left to the interpreter.
        if depth > MAX_DEPTH || refs > MAX_REFS {
            return None;
        }
        self.keywords(object, depth, refs)
            .map(|k| Node::Object(Box::new(k)))
    }

    fn keywords(
        &mut self,
        schema: &Map<String, Value>,
        depth: usize,
        refs: usize,
    ) -> Option<Keywords> {
        let mut k = Keywords::default();
        for (key, value) in schema {
            match key.as_str() {
                "$ref" => {
                    if let Value::String(reference) = value {
                        // An unresolvable reference is not checked (as by the interpreter).
                        if let Some(target) = resolve(self.root, reference) {
                            k.reference = Some(Box::new(self.node(target, depth, refs + 1)?));
                        }
                    }
                }
                "anyOf" | "oneOf" | "allOf" if value.is_array() => return None,
                "nullable" => k.nullable = value == &Value::Bool(true),
                "type" => k.kinds = Kinds::of(value),
                "enum" => k.enumeration = value.as_array().cloned(),
                "const" => k.constant = Some(value.clone()),
                "properties" => {
                    if let Value::Object(properties) = value {
                        let mut compiled = Vec::with_capacity(properties.len());
                        for (name, sub) in properties {
                            compiled.push(Property {
                                name: name.as_str().into(),
                                schema: self.node(sub, depth + 1, refs)?,
                                required: false,
                            });
                        }
                        // A map iterates in key order, or in insertion order with serde_json's
                        // `preserve_order`: sorted here for the lookups either way.
                        compiled.sort_unstable_by(|a, b| a.name.cmp(&b.name));
                        k.properties = Some(compiled);
                    }
                }
                "additionalProperties" => {
                    k.additional = match value {
                        Value::Bool(false) => Additional::Refused,
                        Value::Object(_) => {
                            Additional::Checked(Box::new(self.node(value, depth + 1, refs)?))
                        }
                        _ => Additional::Allowed,
                    }
                }
                "items" => k.items = Some(Box::new(self.node(value, depth + 1, refs)?)),
                "minItems" => k.min_items = value.as_u64(),
                "maxItems" => k.max_items = value.as_u64(),
                "minLength" => k.min_length = value.as_u64(),
                "maxLength" => k.max_length = value.as_u64(),
                "minimum" => k.minimum = value.as_f64(),
                "maximum" => k.maximum = value.as_f64(),
                _ => {}
            }
        }
        // `required` marks properties, so it is read once they are all known.
        if let Some(Value::Array(names)) = schema.get("required") {
            for name in names.iter().filter_map(Value::as_str) {
                match k.property_mut(name) {
                    Some(property) => property.required = true,
                    None => k.required_elsewhere.push(name.into()),
                }
            }
        }
        k.required_properties = k.properties.iter().flatten().filter(|p| p.required).count();
        Some(k)
    }
}

impl Node {
    /// True when [`validate_args`] would find no problem with `value` here, `depth` levels
    /// into the arguments, with `steps` schema-and-value steps taken so far.
    fn accepts(&self, value: &Value, depth: usize, steps: &mut usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        *steps += 1;
        if *steps > MAX_STEPS {
            return false;
        }
        match self {
            Node::Any => true,
            Node::Never => false,
            Node::Object(k) => k.accepts(value, depth, steps),
        }
    }
}

impl Keywords {
    /// Where `name` is in `properties`.
    fn property_at(&self, name: &str) -> Option<usize> {
        let properties = self.properties.as_ref()?;
        properties.binary_search_by(|p| (*p.name).cmp(name)).ok()
    }

    fn property_mut(&mut self, name: &str) -> Option<&mut Property> {
        let at = self.property_at(name)?;
        self.properties.as_mut()?.get_mut(at)
    }

    fn accepts(&self, value: &Value, depth: usize, steps: &mut usize) -> bool {
        // The reference is checked first, at the same depth: `nullable` does not excuse it.
        if let Some(target) = &self.reference
            && !target.accepts(value, depth, steps)
        {
            return false;
        }
        if self.nullable && value.is_null() {
            return true;
        }
        if !self.kinds.allow(value) {
            return false;
        }
        if let Some(options) = &self.enumeration {
            // The interpreter counts each option compared as a step.
            *steps += options.len();
            if *steps > MAX_STEPS || !options.contains(value) {
                return false;
            }
        }
        if self.constant.as_ref().is_some_and(|c| c != value) {
            return false;
        }
        match value {
            Value::Object(map) => self.accepts_object(map, depth, steps),
            Value::Array(items) => {
                let n = items.len() as u64;
                self.min_items.is_none_or(|min| n >= min)
                    && self.max_items.is_none_or(|max| n <= max)
                    && self.items.as_ref().is_none_or(|schema| {
                        items
                            .iter()
                            .all(|item| schema.accepts(item, depth + 1, steps))
                    })
            }
            Value::String(text) => {
                if self.min_length.is_none() && self.max_length.is_none() {
                    return true;
                }
                let n = text.chars().count() as u64;
                self.min_length.is_none_or(|min| n >= min)
                    && self.max_length.is_none_or(|max| n <= max)
            }
            Value::Number(n) => match n.as_f64() {
                Some(v) => {
                    self.minimum.is_none_or(|min| v >= min)
                        && self.maximum.is_none_or(|max| v <= max)
                }
                None => true,
            },
            Value::Bool(_) | Value::Null => true,
        }
    }

    fn accepts_object(&self, map: &Map<String, Value>, depth: usize, steps: &mut usize) -> bool {
        if !self
            .required_elsewhere
            .iter()
            .all(|name| map.contains_key(&**name))
        {
            return false;
        }
        let properties = self.properties.as_deref().unwrap_or_default();
        let mut required_seen = 0;
        // Keys and properties are both in name order when the map is (serde_json's default):
        // then each key is the property after the last one found, and no search is needed.
        let mut next = 0;
        for (key, value) in map {
            let at = match properties.get(next) {
                Some(p) if *p.name == **key => Some(next),
                _ => self.property_at(key),
            };
            let accepted = match at.and_then(|at| properties.get(at).map(|p| (at, p))) {
                Some((at, property)) => {
                    next = at + 1;
                    required_seen += usize::from(property.required);
                    property.schema.accepts(value, depth + 1, steps)
                }
                None => match &self.additional {
                    Additional::Checked(schema) => schema.accepts(value, depth + 1, steps),
                    Additional::Refused => false,
                    Additional::Allowed => true,
                },
            };
            if !accepted {
                return false;
            }
        }
        required_seen == self.required_properties
    }
}

#[cfg(test)]
mod tests;
