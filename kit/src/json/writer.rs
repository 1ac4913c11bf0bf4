//! The serializer: compact JSON into a byte buffer, the shapes exactly as serde_json writes them.
//!
//! Strings and keys go through [`escape`](super::escape); integers through `itoa`, as
//! serde_json writes them; floats, bytes, map keys that are not strings, and anything
//! serde_json treats specially are handed to serde_json itself, so the bytes and the errors
//! stay its own.

use serde::ser::{self, Impossible, Serialize};
use serde_json::Error;

use super::escape::write_str;

/// The struct name serde_json's `RawValue` serializes under; its one field is the raw text.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// Writes into a buffer.
pub(super) struct Writer<'a> {
    pub(super) out: &'a mut Vec<u8>,
}

/// Writes an integer as serde_json does (it formats them with `itoa` too), without going
/// through its `io::Write` path.
fn write_int(out: &mut Vec<u8>, v: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Runs one of serde_json's own serializer methods on the same buffer.
macro_rules! by_serde_json {
    ($self:ident, $method:ident, $value:expr) => {
        ser::Serializer::$method(&mut serde_json::Serializer::new(&mut *$self.out), $value)
    };
}

impl<'a, 'w> ser::Serializer for &'w mut Writer<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a, 'w>;
    type SerializeTuple = Compound<'a, 'w>;
    type SerializeTupleStruct = Compound<'a, 'w>;
    type SerializeTupleVariant = Compound<'a, 'w>;
    type SerializeMap = Compound<'a, 'w>;
    type SerializeStruct = Compound<'a, 'w>;
    type SerializeStructVariant = Compound<'a, 'w>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        by_serde_json!(self, serialize_f32, v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        by_serde_json!(self, serialize_f64, v)
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        by_serde_json!(self, serialize_bytes, v)
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_none()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.open_variant(variant);
        value.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Compound<'a, 'w>, Error> {
        Ok(Compound::open(self, b'[', b']', len))
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a, 'w>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'w>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'w>, Error> {
        self.open_variant(variant);
        Ok(Compound::open(self, b'[', b']', Some(len)).in_variant())
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Compound<'a, 'w>, Error> {
        Ok(Compound::open(self, b'{', b'}', len))
    }
    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Compound<'a, 'w>, Error> {
        if name == RAW_VALUE_TOKEN {
            return Ok(Compound {
                w: self,
                state: State::Raw,
                close: 0,
                variant: false,
            });
        }
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'w>, Error> {
        self.open_variant(variant);
        Ok(Compound::open(self, b'{', b'}', Some(len)).in_variant())
    }
}

impl Writer<'_> {
    /// `{"variant":`, the wrapper of an enum variant with data.
    fn open_variant(&mut self, variant: &str) {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.push(b':');
    }
}

/// Where a sequence or map is: serde_json's states, including its quirk of closing at once
/// when told it has no elements.
#[derive(PartialEq)]
enum State {
    /// Closed at the start (announced empty); anything added still gets a comma.
    Empty,
    /// Nothing written yet.
    First,
    /// At least one element written.
    Rest,
    /// A `RawValue`: its text is written as it is.
    Raw,
}

/// An array, object or wrapped variant being written.
pub(super) struct Compound<'a, 'w> {
    w: &'w mut Writer<'a>,
    state: State,
    /// The closing bracket.
    close: u8,
    /// Whether a variant's `}` follows the closing bracket.
    variant: bool,
}

impl<'a, 'w> Compound<'a, 'w> {
    fn open(w: &'w mut Writer<'a>, open: u8, close: u8, len: Option<usize>) -> Self {
        w.out.push(open);
        let state = if len == Some(0) {
            w.out.push(close);
            State::Empty
        } else {
            State::First
        };
        Compound {
            w,
            state,
            close,
            variant: false,
        }
    }

    fn in_variant(mut self) -> Self {
        self.variant = true;
        self
    }

    /// The separator before an element or key.
    fn separate(&mut self) {
        if self.state != State::First {
            self.w.out.push(b',');
        }
        self.state = State::Rest;
    }

    fn element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        self.separate();
        value.serialize(&mut *self.w)
    }

    fn field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        if self.state == State::Raw {
            return if key == RAW_VALUE_TOKEN {
                value.serialize(RawText(self.w))
            } else {
                Err(not_raw_text())
            };
        }
        self.separate();
        write_str(self.w.out, key);
        self.w.out.push(b':');
        value.serialize(&mut *self.w)
    }

    fn close(self) -> Result<(), Error> {
        if matches!(self.state, State::First | State::Rest) {
            self.w.out.push(self.close);
        }
        if self.variant {
            self.w.out.push(b'}');
        }
        Ok(())
    }
}

/// The sequence-like compounds: each element after a separator.
macro_rules! elements {
    ($($trait:ident::$method:ident),* $(,)?) => {$(
        impl ser::$trait for Compound<'_, '_> {
            type Ok = ();
            type Error = Error;
            fn $method<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
                self.element(value)
            }
            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

elements!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
);

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), Error> {
        self.separate();
        key.serialize(MapKey(self.w))?;
        self.w.out.push(b':');
        Ok(())
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut *self.w)
    }
    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

/// The struct-like compounds: each field under its name.
macro_rules! fields {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Compound<'_, '_> {
            type Ok = ();
            type Error = Error;
            fn serialize_field<T: ?Sized + Serialize>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Error> {
                self.field(key, value)
            }
            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

fields!(SerializeStruct, SerializeStructVariant);

/// Serializer methods for compound values, each refused with `$error()`.
macro_rules! refuse_compounds {
    ($error:ident) => {
        fn serialize_newtype_variant<T: ?Sized + Serialize>(
            self,
            _name: &'static str,
            _index: u32,
            _variant: &'static str,
            _value: &T,
        ) -> Result<(), Error> {
            Err($error())
        }
        fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
            Err($error())
        }
        fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
            Err($error())
        }
        fn serialize_tuple_struct(
            self,
            _name: &'static str,
            _len: usize,
        ) -> Result<Self::SerializeTupleStruct, Error> {
            Err($error())
        }
        fn serialize_tuple_variant(
            self,
            _name: &'static str,
            _index: u32,
            _variant: &'static str,
            _len: usize,
        ) -> Result<Self::SerializeTupleVariant, Error> {
            Err($error())
        }
        fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
            Err($error())
        }
        fn serialize_struct(
            self,
            _name: &'static str,
            _len: usize,
        ) -> Result<Self::SerializeStruct, Error> {
            Err($error())
        }
        fn serialize_struct_variant(
            self,
            _name: &'static str,
            _index: u32,
            _variant: &'static str,
            _len: usize,
        ) -> Result<Self::SerializeStructVariant, Error> {
            Err($error())
        }
    };
}

/// Serializer methods for scalars, each refused with `$error()`.
macro_rules! refuse_scalars {
    ($error:ident; $($method:ident: $ty:ty),* $(,)?) => {
        $(fn $method(self, _v: $ty) -> Result<(), Error> {
            Err($error())
        })*
    };
}

/// A map key: a string is written here; any other key goes to serde_json, which quotes what
/// it accepts (numbers, booleans) and refuses the rest with its own error.
struct MapKey<'a, 'w>(&'w mut Writer<'a>);

impl MapKey<'_, '_> {
    /// Writes `key` as serde_json writes a map key: through a one-entry map of its own, whose
    /// opening brace is then taken off.
    fn by_serde_json<T: ?Sized + Serialize>(self, key: &T) -> Result<(), Error> {
        use ser::{SerializeMap, Serializer};
        let out = &mut *self.0.out;
        let start = out.len();
        let mut json = serde_json::Serializer::new(&mut *out);
        let mut map = (&mut json).serialize_map(None)?;
        map.serialize_key(key)?;
        // The map is left unfinished: only its key was wanted.
        out.remove(start);
        Ok(())
    }
}

/// Hands a key's primitive to serde_json's key rules.
macro_rules! key_by_serde_json {
    ($($method:ident: $ty:ty),* $(,)?) => {
        $(fn $method(self, v: $ty) -> Result<(), Error> {
            self.by_serde_json(&v)
        })*
    };
}

impl ser::Serializer for MapKey<'_, '_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(self.0.out, v);
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    key_by_serde_json! {
        serialize_bool: bool, serialize_char: char,
        serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_u128: u128, serialize_f32: f32, serialize_f64: f64,
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        self.by_serde_json(&Bytes(v))
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.by_serde_json(&None::<()>)
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), Error> {
        self.by_serde_json(&Some(value))
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.by_serde_json(&())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.by_serde_json(&())
    }
    refuse_compounds!(key_must_be_a_string);
}

/// serde_json's refusal of a key that is not a string, in its words.
fn key_must_be_a_string() -> Error {
    ser::Error::custom("key must be a string")
}

/// A byte slice that serializes as bytes (for handing a bytes key to serde_json).
struct Bytes<'b>(&'b [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: ser::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

/// A `RawValue`'s text, written as it is (serde_json checked it when the value was made).
struct RawText<'a, 'w>(&'w mut Writer<'a>);

impl ser::Serializer for RawText<'_, '_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.0.out.extend_from_slice(v.as_bytes());
        Ok(())
    }

    refuse_scalars!(not_raw_text;
        serialize_bool: bool, serialize_char: char,
        serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_u128: u128, serialize_f32: f32, serialize_f64: f64,
        serialize_bytes: &[u8],
    );
    fn serialize_none(self) -> Result<(), Error> {
        Err(not_raw_text())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, _value: &T) -> Result<(), Error> {
        Err(not_raw_text())
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Err(not_raw_text())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        Err(not_raw_text())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
    ) -> Result<(), Error> {
        Err(not_raw_text())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _value: &T,
    ) -> Result<(), Error> {
        Err(not_raw_text())
    }
    refuse_compounds!(not_raw_text);
}

/// What serde_json says when a `RawValue` field holds anything but its text.
fn not_raw_text() -> Error {
    ser::Error::custom("expected RawValue")
}
